// Publish anchor: nats.go PublishAsync with every PubAck awaited.
//
// usage: publish <url> <subject> <count> <size>
// Prints the elapsed seconds on the last line.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: publish <url> <subject> <count> <size>")
		os.Exit(2)
	}
	url, subject := os.Args[1], os.Args[2]
	count, _ := strconv.Atoi(os.Args[3])
	size, _ := strconv.Atoi(os.Args[4])

	nc, err := nats.Connect(url)
	check(err)
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(4000))
	check(err)
	payload := make([]byte, size)

	start := time.Now()
	futures := make([]nats.PubAckFuture, 0, count)
	for i := 0; i < count; i++ {
		f, err := js.PublishAsync(subject, payload)
		check(err)
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			check(err)
		}
	}
	fmt.Printf("%.6f\n", time.Since(start).Seconds())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
