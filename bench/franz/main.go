// The franz-go side of bench/run: bench-franz <bootstrap> <topic> <partitions> <records>.
// Same line protocol as core/examples/bench_consume.rs (START / PROGRESS / RESULT).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func cpuTicks() int64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: bench-franz <bootstrap> <topic> <partitions> <records>")
		os.Exit(2)
	}
	bootstrap, topic := os.Args[1], os.Args[2]
	partitions, _ := strconv.Atoi(os.Args[3])
	want, _ := strconv.ParseInt(os.Args[4], 10, 64)
	offsets := map[int32]kgo.Offset{}
	for p := 0; p < partitions; p++ {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	fmt.Printf("START %d\n", cpuTicks())
	t0 := time.Now()
	// franz-go validates record batch CRCs by default (kgo.DisableFetchCRCValidation is not set).
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID("bench-franz"),
		kgo.FetchMaxBytes(52428800),
		kgo.FetchMaxPartitionBytes(1048576),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	// bench/eos: BENCH_CONFIG lines; franz-go's options for the one key it is given.
	for _, line := range strings.Split(os.Getenv("BENCH_CONFIG"), "\n") {
		switch line {
		case "":
		case "isolation.level=read_committed":
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		case "isolation.level=read_uncommitted":
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
		default:
			fmt.Fprintln(os.Stderr, "BENCH_CONFIG: no franz-go option for", line)
			os.Exit(2)
		}
	}
	// BENCH_GROUP=<group.id>: subscribe in that group instead of assigning.
	if group := os.Getenv("BENCH_GROUP"); group != "" {
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	} else {
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer cl.Close()
	var n, bytes int64
	lastData := time.Now()
	nextReport := lastData.Add(time.Second)
	for n < want {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := cl.PollRecords(ctx, 500)
		cancel()
		for _, e := range fetches.Errors() {
			if e.Err != context.DeadlineExceeded {
				fmt.Fprintln(os.Stderr, "fetch error:", e.Topic, e.Partition, e.Err)
				os.Exit(1)
			}
		}
		now := time.Now()
		got := 0
		fetches.EachRecord(func(r *kgo.Record) {
			bytes += int64(len(r.Key) + len(r.Value))
			got++
		})
		if got == 0 {
			if now.Sub(lastData) > 60*time.Second {
				fmt.Fprintf(os.Stderr, "no records for 60 s after %d of %d\n", n, want)
				os.Exit(1)
			}
			continue
		}
		n += int64(got)
		lastData = now
		if now.After(nextReport) {
			fmt.Printf("PROGRESS %d\n", n)
			nextReport = now.Add(time.Second)
		}
	}
	secs := time.Since(t0).Seconds()
	fmt.Printf("RESULT %d %d %.6f %d\n", n, bytes, secs, cpuTicks())
}
