// million: the Go column of benches/million_report.rs. Parks n goroutines
// at once, each on a channel of its own, then wakes each with one value
// and waits for its answer. Prints "spawn_s rss_per_parked_bytes wake_s"
// (RSS from /proc/self/statm, Linux).
//
//	go build -o million-go benches/go/million.go && GOMAXPROCS=1 ./million-go -n 1000000
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

func main() {
	n := flag.Int("n", 1000000, "goroutines parked at once")
	flag.Parse()
	before := rss()
	ins := make([]chan uint64, *n)
	outs := make([]chan uint64, *n)
	var parked sync.WaitGroup
	parked.Add(*n)
	t := time.Now()
	for i := 0; i < *n; i++ {
		in, out := make(chan uint64), make(chan uint64, 1)
		ins[i], outs[i] = in, out
		go func(i uint64) {
			parked.Done()
			out <- <-in + i
		}(uint64(i))
	}
	// Done runs just before the receive parks the goroutine.
	parked.Wait()
	spawn := time.Since(t).Seconds()
	per := float64(rss()-before) / float64(*n)
	t = time.Now()
	var sum uint64
	for i := 0; i < *n; i++ {
		ins[i] <- 1
		sum += <-outs[i]
	}
	want := uint64(*n) * uint64(*n+1) / 2
	if sum != want {
		fmt.Fprintf(os.Stderr, "sum %d, want %d\n", sum, want)
		os.Exit(1)
	}
	fmt.Printf("%.4f %.0f %.4f\n", spawn, per, time.Since(t).Seconds())
}
