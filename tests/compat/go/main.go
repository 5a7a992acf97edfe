// Command compat-go runs the compatibility scenarios of the Apache RocketMQ Go client
// (github.com/apache/rocketmq-client-go/v2) against one name server:
//
//	compat-go --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911] [--only a,b]
//	compat-go failover --phase setup|produce|consume ...   (failover suite phases: failover.go)
//
// Scenarios: producer sync, async and batch sends (each checked by a push consumer) and a
// clustering push consumer whose two members split the queues and filter by tag. Every
// message carries a unique "cid" property; what arrives is compared with what was sent
// (topic, body, tags, keys, every property). Prints PASS/FAIL per scenario and
// "N passed, N failed"; exits 1 on any failure, 2 on bad arguments.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const (
	queues           = 4
	arrivalTimeout   = 45 * time.Second
	scenarioTimeout  = 120 * time.Second
	largeBodyBytes   = 8 * 1024 // above the 4 KiB compression threshold
	routeWaitTimeout = 30 * time.Second
)

// env is what every scenario needs: addresses, the run id and an admin client.
type env struct {
	namesrv string
	broker  string
	runID   string
	admin   admin.Admin
}

type scenario struct {
	name string
	run  func(e *env, name string) (string, error)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "failover" {
		os.Exit(failoverMain(os.Args[2:]))
	}
	namesrv := flag.String("namesrv", "", "name server address, HOST:PORT (required)")
	broker := flag.String("broker", "", "broker address for topic creation (default: name server host, port 10911)")
	only := flag.String("only", "", "comma-separated scenario names to run")
	flag.Parse()
	if *namesrv == "" {
		fmt.Fprintln(os.Stderr, "error: --namesrv is required")
		os.Exit(2)
	}
	if *broker == "" {
		host, _, err := net.SplitHostPort(*namesrv)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error: bad --namesrv:", err)
			os.Exit(2)
		}
		*broker = net.JoinHostPort(host, "10911")
	}
	level := os.Getenv("COMPAT_GO_LOG")
	if level == "" {
		level = "error"
	}
	rlog.SetLogLevel(level)

	all := []scenario{
		{"go_producer_sync", producerSync},
		{"go_producer_async", producerAsync},
		{"go_producer_batch", producerBatch},
		{"go_push_clustering", pushClustering},
	}
	if *only != "" {
		all = pick(all, strings.Split(*only, ","))
	}
	os.Exit(runAll(*namesrv, *broker, all))
}

func pick(all []scenario, names []string) []scenario {
	var out []scenario
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.name == n {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			fmt.Fprintln(os.Stderr, "error: unknown scenario", n)
			os.Exit(2)
		}
	}
	return out
}

func runAll(namesrv, broker string, scenarios []scenario) int {
	fmt.Printf("rocketmq-client-go v2 against name server %s (broker %s)\n", namesrv, broker)
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{namesrv})))
	if err != nil {
		fmt.Println("FAIL setup: admin client:", err)
		fmt.Printf("0 passed, %d failed\n", len(scenarios))
		return 1
	}
	defer adm.Close()
	e := &env{namesrv: namesrv, broker: broker, runID: fmt.Sprintf("%08x", rand.New(rand.NewSource(time.Now().UnixNano())).Uint32()), admin: adm}
	passed, failed := 0, 0
	var failedNames []string
	for _, s := range scenarios {
		start := time.Now()
		detail, err := runBounded(e, s)
		ms := time.Since(start).Milliseconds()
		if err != nil {
			fmt.Printf("FAIL %-28s (%5d ms): %v\n", s.name, ms, err)
			failed++
			failedNames = append(failedNames, s.name)
		} else {
			fmt.Printf("PASS %-28s (%5d ms) %s\n", s.name, ms, detail)
			passed++
		}
	}
	if failed > 0 {
		fmt.Println("failed scenarios:", strings.Join(failedNames, ", "))
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// runBounded runs one scenario with an overall deadline, so a hang fails instead of blocking.
func runBounded(e *env, s scenario) (string, error) {
	type outcome struct {
		detail string
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{"", fmt.Errorf("panic: %v", r)}
			}
		}()
		d, err := s.run(e, s.name)
		done <- outcome{d, err}
	}()
	select {
	case o := <-done:
		return o.detail, o.err
	case <-time.After(scenarioTimeout):
		return "", fmt.Errorf("timed out after %s", scenarioTimeout)
	}
}

// name gives a resource name unique to this run and scenario.
func (e *env) name(prefix, scenario string) string {
	return fmt.Sprintf("%s_%s_%s", prefix, scenario, e.runID)
}

// createTopic creates the topic with four read/write queues on the broker and waits until the
// name server returns its route.
func (e *env) createTopic(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := e.admin.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(e.broker),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues))
	if err != nil {
		return fmt.Errorf("create topic %s on %s: %w", topic, e.broker, err)
	}
	deadline := time.Now().Add(routeWaitTimeout)
	for {
		mqs, err := e.admin.FetchPublishMessageQueues(context.Background(), topic)
		if err == nil && len(mqs) == queues {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("route of new topic %s never appeared: %v (%d queues)", topic, err, len(mqs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sent is what a scenario sent, for comparison with what arrives.
type sent struct {
	cid   string
	topic string
	tags  string
	keys  []string
	body  []byte
	props map[string]string
}

func (s *sent) message() *primitive.Message {
	m := primitive.NewMessage(s.topic, s.body)
	m.WithTag(s.tags)
	m.WithKeys(s.keys)
	for k, v := range s.props {
		m.WithProperty(k, v)
	}
	return m
}

// makeMessages builds n messages cycling through tags; every 25th has a body large enough to be
// compressed, odd ones carry two keys, all carry a non-ASCII property value.
func makeMessages(e *env, topic string, n int, tags []string) []*sent {
	out := make([]*sent, 0, n)
	for i := 0; i < n; i++ {
		cid := fmt.Sprintf("%s-%s-%d", e.runID, topic, i)
		size := 100 + i%300
		if i%25 == 0 {
			size = largeBodyBytes
		}
		var b strings.Builder
		b.WriteString("body " + cid + " ")
		for b.Len() < size {
			b.WriteByte(byte('a' + (b.Len()*7+i)%26))
		}
		keys := []string{fmt.Sprintf("k%d-%s", i, e.runID)}
		if i%2 == 1 {
			keys = append(keys, fmt.Sprintf("alt%d-%s", i, e.runID))
		}
		out = append(out, &sent{
			cid: cid, topic: topic, tags: tags[i%len(tags)], keys: keys, body: []byte(b.String()),
			props: map[string]string{"cid": cid, "idx": fmt.Sprint(i), "note": "h\u00e9llo w\u00f6rld \u2713 a=b"},
		})
	}
	return out
}

// collector records arrivals of one consumer member.
type collector struct {
	mu       sync.Mutex
	got      []*primitive.MessageExt
	distinct map[string]bool
}

func newCollector() *collector { return &collector{distinct: map[string]bool{}} }

func (c *collector) add(msgs []*primitive.MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.got = append(c.got, m)
		c.distinct[m.GetProperty("cid")] = true
	}
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.distinct)
}

func (c *collector) arrivals() []*primitive.MessageExt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*primitive.MessageExt(nil), c.got...)
}

func waitFor(what string, timeout time.Duration, done func() bool) error {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// verify checks that every expected message arrived intact and nothing else arrived;
// duplicates fail unless allowed (at-least-once delivery around a rebalance).
func verify(expected []*sent, got []*primitive.MessageExt, allowDup bool) (string, error) {
	byCid := map[string]*sent{}
	for _, s := range expected {
		byCid[s.cid] = s
	}
	seen := map[string]int{}
	var problems []string
	dups := 0
	for _, m := range got {
		cid := m.GetProperty("cid")
		s, ok := byCid[cid]
		if !ok {
			problems = append(problems, fmt.Sprintf("unexpected message cid=%q tags=%q", cid, m.GetTags()))
			continue
		}
		seen[cid]++
		if seen[cid] > 1 {
			dups++
			continue
		}
		problems = append(problems, compare(s, m)...)
	}
	missing := 0
	for _, s := range expected {
		if seen[s.cid] == 0 {
			if missing < 3 {
				problems = append(problems, "missing cid="+s.cid)
			}
			missing++
		}
	}
	if missing > 3 {
		problems = append(problems, fmt.Sprintf("... %d missing in all", missing))
	}
	if dups > 0 && !allowDup {
		problems = append(problems, fmt.Sprintf("%d duplicate deliveries", dups))
	}
	if len(problems) > 0 {
		if len(problems) > 8 {
			problems = problems[:8]
		}
		return "", fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	detail := fmt.Sprintf("%d msgs intact", len(expected))
	if dups > 0 {
		detail += fmt.Sprintf(", %d dup", dups)
	}
	return detail, nil
}

func compare(s *sent, m *primitive.MessageExt) []string {
	var p []string
	id := "cid=" + s.cid + ": "
	if m.Topic != s.topic {
		p = append(p, id+"topic "+m.Topic)
	}
	if string(m.Body) != string(s.body) {
		p = append(p, fmt.Sprintf("%sbody differs (%d bytes, sent %d)", id, len(m.Body), len(s.body)))
	}
	if m.GetTags() != s.tags {
		p = append(p, fmt.Sprintf("%stags %q != %q", id, m.GetTags(), s.tags))
	}
	if want := strings.Join(s.keys, " "); m.GetKeys() != want {
		p = append(p, fmt.Sprintf("%skeys %q != %q", id, m.GetKeys(), want))
	}
	for k, v := range s.props {
		if got := m.GetProperty(k); got != v {
			p = append(p, fmt.Sprintf("%sproperty %s=%q != %q", id, k, got, v))
		}
	}
	if m.MsgId == "" || m.QueueOffset < 0 || m.StoreTimestamp <= 0 || m.BornTimestamp <= 0 {
		p = append(p, fmt.Sprintf("%sbad system fields msgId=%q queueOffset=%d", id, m.MsgId, m.QueueOffset))
	}
	return p
}

func checkResult(r *primitive.SendResult, err error) error {
	if err != nil {
		return fmt.Errorf("send failed: %w", err)
	}
	if r.Status != primitive.SendOK || r.MsgID == "" || r.OffsetMsgID == "" || r.QueueOffset < 0 {
		return fmt.Errorf("bad send result: %v", r)
	}
	return nil
}
