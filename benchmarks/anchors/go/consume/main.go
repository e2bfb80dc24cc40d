// Consume anchor: nats.go (legacy JetStream API, as packaged by Debian)
// pulling with Fetch(500) from an existing durable consumer.
//
// usage: consume <url> <stream> <durable> <count> <ack 0|1>
// Prints the elapsed seconds (first fetch to last ack flushed) on the last line.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: consume <url> <stream> <durable> <count> <ack 0|1>")
		os.Exit(2)
	}
	url, stream, durable := os.Args[1], os.Args[2], os.Args[3]
	count, _ := strconv.Atoi(os.Args[4])
	ack := os.Args[5] == "1"

	nc, err := nats.Connect(url)
	check(err)
	defer nc.Close()
	js, err := nc.JetStream()
	check(err)
	sub, err := js.PullSubscribe("", durable, nats.Bind(stream, durable))
	check(err)

	start := time.Now()
	got := 0
	for got < count {
		msgs, err := sub.Fetch(500, nats.MaxWait(5*time.Second))
		if err != nil && err != nats.ErrTimeout {
			check(err)
		}
		for _, m := range msgs {
			if ack {
				check(m.Ack())
			}
			got++
		}
	}
	check(nc.Flush())
	fmt.Printf("%.6f\n", time.Since(start).Seconds())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
