// Anchor on nats.go and its jetstream package (v1.53.1, built by
// anchors/build-nats-go.sh; v1.30.2 with Debian's Go 1.19 as a fallback), one
// binary for every like-for-like pair.
//
// usage:
//   jetstream messages <url> <stream> <consumer> <count> <ack 0|1>
//   jetstream consume  <url> <stream> <consumer> <count> <ack 0|1>
//   jetstream fetch    <url> <stream> <consumer> <count> <ack 0|1> <batch>
//   jetstream publish-async <url> <subject> <count> <size> <max pending>
//   jetstream core-publish  <url> <subject> <count> <size>   (nc.Publish each, then Flush)
//   jetstream request       <url> <subject> <count> <size>   (nc.Request one at a time)
//   jetstream publish-sync  <url> <subject> <count> <size> <goroutines>
//                           (js.Publish, each goroutine one at a time; count split between them)
//
// Consumers use the package defaults (Messages/Consume: 500 messages a pull,
// refill at half), as the Python side does. Prints the elapsed seconds on its
// last line: from the first call to the last ack flushed or PubAck received.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if len(os.Args) < 6 {
		fmt.Fprintln(os.Stderr, "usage: see the comment at the top of main.go")
		os.Exit(2)
	}
	mode, url := os.Args[1], os.Args[2]
	nc, err := nats.Connect(url)
	check(err)
	defer nc.Close()

	var elapsed time.Duration
	switch mode {
	case "messages", "consume", "fetch":
		count := atoi(os.Args[5])
		ack := os.Args[6] == "1"
		js, err := jetstream.New(nc)
		check(err)
		cons, err := js.Consumer(context.Background(), os.Args[3], os.Args[4])
		check(err)
		start := time.Now()
		switch mode {
		case "messages":
			messages(cons, count, ack)
		case "consume":
			consume(cons, count, ack)
		default:
			fetch(cons, count, ack, atoi(os.Args[7]))
		}
		check(nc.Flush())
		elapsed = time.Since(start)
	case "publish-async":
		count, size := atoi(os.Args[4]), atoi(os.Args[5])
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(atoi(os.Args[6])))
		check(err)
		payload := make([]byte, size)
		start := time.Now()
		futures := make([]jetstream.PubAckFuture, 0, count)
		for i := 0; i < count; i++ {
			f, err := js.PublishAsync(os.Args[3], payload)
			check(err)
			futures = append(futures, f)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(5 * time.Minute):
			check(fmt.Errorf("PubAcks did not arrive"))
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				check(err)
			}
		}
		elapsed = time.Since(start)
	case "publish-sync":
		count, size, workers := atoi(os.Args[4]), atoi(os.Args[5]), atoi(os.Args[6])
		js, err := jetstream.New(nc)
		check(err)
		payload := make([]byte, size)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < workers; w++ {
			share := count / workers
			if w < count%workers {
				share++
			}
			wg.Add(1)
			go func(share int) {
				defer wg.Done()
				for i := 0; i < share; i++ {
					_, err := js.Publish(context.Background(), os.Args[3], payload)
					check(err)
				}
			}(share)
		}
		wg.Wait()
		elapsed = time.Since(start)
	case "core-publish":
		count, size := atoi(os.Args[4]), atoi(os.Args[5])
		payload := make([]byte, size)
		start := time.Now()
		for i := 0; i < count; i++ {
			check(nc.Publish(os.Args[3], payload))
		}
		check(nc.Flush())
		elapsed = time.Since(start)
	case "request":
		count, size := atoi(os.Args[4]), atoi(os.Args[5])
		payload := make([]byte, size)
		start := time.Now()
		for i := 0; i < count; i++ {
			_, err := nc.Request(os.Args[3], payload, 5*time.Second)
			check(err)
		}
		elapsed = time.Since(start)
	default:
		check(fmt.Errorf("unknown mode %q", mode))
	}
	fmt.Printf("%.6f\n", elapsed.Seconds())
}

func messages(cons jetstream.Consumer, count int, ack bool) {
	it, err := cons.Messages()
	check(err)
	defer it.Stop()
	for got := 0; got < count; got++ {
		msg, err := it.Next()
		check(err)
		if ack {
			check(msg.Ack())
		}
	}
}

func consume(cons jetstream.Consumer, count int, ack bool) {
	var got int64
	done := make(chan struct{})
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if ack {
			check(msg.Ack())
		}
		if atomic.AddInt64(&got, 1) == int64(count) {
			close(done)
		}
	})
	check(err)
	defer cc.Stop()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		check(fmt.Errorf("consume: timed out"))
	}
}

func fetch(cons jetstream.Consumer, count int, ack bool, batch int) {
	for got := 0; got < count; {
		b, err := cons.Fetch(batch, jetstream.FetchMaxWait(5*time.Second))
		check(err)
		for msg := range b.Messages() {
			if ack {
				check(msg.Ack())
			}
			got++
		}
		if b.Error() != nil && b.Error() != nats.ErrTimeout {
			check(b.Error())
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	check(err)
	return n
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
