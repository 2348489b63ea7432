// peers: the Go column of five bench workloads (switch_cost local and
// yield_many, ping_pong_steady, spawn_join, msg_pairs, skynet), the same
// work as the smarm, tokio and may rows of benches/*.rs, with goroutines
// and channels, on GOMAXPROCS workers. scripts/bench.py run builds it and
// runs it once per worker count (GOMAXPROCS=1, 2, ...) when `go` is
// installed.
//
// Each row prints one JSON line with the id its Rust counterparts have
// (e.g. "msg_pairs/linux/2w/go/32"): "ns" the mean time per iteration over
// the samples, "ci" a 95% interval of that mean (normal approximation),
// "min" and "max" the fastest and slowest sample, "elements" the elements
// per iteration where the Rust rows count them, "samples". Like
// criterion, a warm-up estimates the time per iteration, then each sample
// times enough iterations to fill its share of the measurement time.
//
//	go build -o peers-go benches/go/peers.go && GOMAXPROCS=2 ./peers-go -bench msg_pairs,skynet
//
// Channels: the Rust rows use unbounded queues; ping-pong keeps at most one
// message in flight per direction, so a channel of capacity 1 never blocks
// a send, as an unbounded one would not.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

var (
	warmUp  = flag.Float64("warm-up", 0.5, "warm-up seconds per row")
	measure = flag.Float64("measurement", 1.5, "measurement seconds per row")
	benches = flag.String("bench", "switch_cost,yield_many,ping_pong_steady,spawn_join,msg_pairs,skynet",
		"comma list of the bench binaries whose Go rows to run")
	port = flag.String("port", "", "the port name in the row ids (default: linux, or darwin on macOS)")
)

type row struct {
	ID       string     `json:"id"`
	Ns       float64    `json:"ns"`
	CI       [2]float64 `json:"ci"`
	Min      float64    `json:"min"`
	Max      float64    `json:"max"`
	Elements *uint64    `json:"elements"`
	Samples  int        `json:"samples"`
}

// run times `f(iters)` (which returns the time its iterations took) as
// criterion's iter_custom does and prints the row.
func run(id string, elements uint64, f func(iters uint64) time.Duration) {
	// Warm-up: double the iterations until the warm-up time is spent.
	var spent time.Duration
	var done uint64
	for iters := uint64(1); spent < time.Duration(*warmUp*float64(time.Second)); iters *= 2 {
		spent += f(iters)
		done += iters
	}
	est := float64(spent.Nanoseconds()) / float64(done)
	samples := 20
	total := *measure * 1e9
	if total/est < float64(samples) {
		samples = int(math.Max(3, total/est))
	}
	iters := uint64(math.Max(1, total/float64(samples)/est))
	per := make([]float64, samples)
	for i := range per {
		per[i] = float64(f(iters).Nanoseconds()) / float64(iters)
	}
	var sum, sq float64
	for _, p := range per {
		sum += p
	}
	mean := sum / float64(samples)
	for _, p := range per {
		sq += (p - mean) * (p - mean)
	}
	half := 1.96 * math.Sqrt(sq/float64(samples-1)) / math.Sqrt(float64(samples))
	sort.Float64s(per)
	r := row{ID: id, Ns: mean, CI: [2]float64{mean - half, mean + half}, Min: per[0], Max: per[samples-1], Samples: samples}
	if elements > 0 {
		r.Elements = &elements
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

// timed runs body iters times in a fresh goroutine (as the Rust rows run
// inside an actor, a task or a coroutine) and returns the time taken.
func timed(iters uint64, body func(iters uint64)) time.Duration {
	out := make(chan time.Duration)
	go func() {
		t := time.Now()
		body(iters)
		out <- time.Since(t)
	}()
	return <-out
}

// yieldMany: 1,024 goroutines each yielding 32 times (yield_many.rs).
func yieldMany() {
	const actors, yields = 1024, 32
	done := make(chan struct{}, actors)
	for i := 0; i < actors; i++ {
		go func() {
			for j := 0; j < yields; j++ {
				runtime.Gosched()
			}
			done <- struct{}{}
		}()
	}
	for i := 0; i < actors; i++ {
		<-done
	}
}

// pairs: N ping-pong pairs of msgsEach messages each (msg_pairs.rs);
// returns the messages counted.
func pairs(n, msgsEach uint64) uint64 {
	play := func(rx <-chan uint64, tx chan<- uint64, seen chan<- uint64) {
		var s uint64
		for v := range rx {
			s++
			if v == 0 {
				break
			}
			tx <- v - 1
			if v == 1 {
				break
			}
		}
		seen <- s
	}
	seen := make(chan uint64, 2*n)
	for i := uint64(0); i < n; i++ {
		a, b := make(chan uint64, 1), make(chan uint64, 1)
		b <- msgsEach - 1
		go play(a, b, seen)
		go play(b, a, seen)
	}
	var sum uint64
	for i := uint64(0); i < 2*n; i++ {
		sum += <-seen
	}
	return sum
}

// skynet: a 10-ary tree of goroutines, parents summing their children.
func skynet(num, size uint64, out chan<- uint64) {
	if size == 1 {
		out <- num
		return
	}
	child := size / 10
	rc := make(chan uint64, 10)
	for i := uint64(0); i < 10; i++ {
		go skynet(num+i*child, child, rc)
	}
	var sum uint64
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	out <- sum
}

func check(what string, got, want uint64) {
	if got != want {
		fmt.Fprintf(os.Stderr, "%s: got %d, want %d\n", what, got, want)
		os.Exit(1)
	}
}

func main() {
	flag.Parse()
	if *port == "" {
		*port = "linux"
		if runtime.GOOS == "darwin" {
			*port = "darwin"
		}
	}
	w := runtime.GOMAXPROCS(0)
	on := map[string]bool{}
	for _, b := range strings.Split(*benches, ",") {
		on[strings.TrimSpace(b)] = true
	}
	p := *port

	if on["switch_cost"] && w == 1 {
		run("switch_cost/"+p+"/go/local_1w", 0, func(iters uint64) time.Duration {
			return timed(iters, func(n uint64) {
				for i := uint64(0); i < n; i++ {
					runtime.Gosched()
				}
			})
		})
	}
	if on["yield_many"] {
		run(fmt.Sprintf("yield_many/%s/go/%dw", p, w), 1024*32, func(iters uint64) time.Duration {
			return timed(iters, func(n uint64) {
				for i := uint64(0); i < n; i++ {
					yieldMany()
				}
			})
		})
	}
	if on["ping_pong_steady"] {
		run(fmt.Sprintf("ping_pong_steady/%s/go/%dw", p, w), 0, func(iters uint64) time.Duration {
			toEcho, toMe := make(chan uint64, 1), make(chan uint64, 1)
			go func() {
				for v := range toEcho {
					if v == 0 {
						return
					}
					toMe <- v
				}
			}()
			return timed(iters, func(n uint64) {
				for i := uint64(0); i < n; i++ {
					toEcho <- 1
					<-toMe
				}
				toEcho <- 0
			})
		})
	}
	if on["spawn_join"] {
		run(fmt.Sprintf("spawn_join/%s/go/%dw", p, w), 0, func(iters uint64) time.Duration {
			return timed(iters, func(n uint64) {
				for i := uint64(0); i < n; i++ {
					h := make(chan uint64, 1)
					go func(i uint64) { h <- i }(i)
					check("spawn_join", <-h, i)
				}
			})
		})
	}
	if on["msg_pairs"] {
		const messages = 32768
		for _, n := range []uint64{2, 32, 1024} {
			each := uint64(math.Max(2, float64(messages/n)))
			run(fmt.Sprintf("msg_pairs/%s/%dw/go/%d", p, w, n), n*each, func(iters uint64) time.Duration {
				return timed(iters, func(k uint64) {
					for i := uint64(0); i < k; i++ {
						check("msg_pairs", pairs(n, each), n*each)
					}
				})
			})
		}
	}
	if on["skynet"] {
		for _, t := range []struct {
			name   string
			leaves uint64
		}{{"skynet_10k", 10000}, {"skynet_1M", 1000000}} {
			want := t.leaves * (t.leaves - 1) / 2
			run(fmt.Sprintf("%s/%s/go/%dw", t.name, p, w), 0, func(iters uint64) time.Duration {
				return timed(iters, func(k uint64) {
					for i := uint64(0); i < k; i++ {
						out := make(chan uint64, 1)
						go skynet(0, t.leaves, out)
						check(t.name, <-out, want)
					}
				})
			})
		}
	}
}
