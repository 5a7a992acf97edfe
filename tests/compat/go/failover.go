package main

// The Go client's phases of the failover suite (tests/compat/failover/run.sh, which starts a
// controller and two brokers in controller mode, runs the phases and kills the master while
// the producer sends):
//
//	compat-go failover --namesrv HOST:PORT --phase setup|produce|consume --topic T --run-id R
//	    [--master HOST:PORT --slave HOST:PORT] [--count N --acks FILE --hold-at I
//	    --go-file FILE] [--broker HOST:PORT]
//
//   - setup (--master, --slave): creates the topic (4 queues) on the master with the Go admin
//     client and waits until the name server routes it and the slave's copy of the master's
//     topics holds it.
//   - produce (--count, --acks, --hold-at, --go-file): one producer sends messages
//     0 .. count-1 one at a time with SendSync. Each attempt's outcome is appended to the acks
//     file at once (the script reads it while the phase runs): "OK index ack_ms queue offset
//     store_host" for SEND_OK, "ERR index ms reason" for an error or another status. A failed
//     message is sent again, as a new message with the same body, after a short pause, until
//     it is answered SEND_OK or the phase's deadline passes. Before message hold-at the
//     producer waits for the go file, so the script's kill falls inside the run.
//   - consume (--count, --acks, --broker = the master now): a push consumer of a new group,
//     from the first offset, must receive every body answered SEND_OK, intact; a body may
//     arrive more than once only if it was sent more than once. It also waits until it has
//     seen as many messages as the topic's queues hold on the master, so a stored duplicate
//     shows before the check.
//
// The acks file has the format of the Java phases (FailoverSuite), so the script reads both
// the same way. Prints PASS/FAIL per step and "N passed, N failed"; exits 1 when the step
// failed, 2 on bad arguments.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const (
	failoverWait = 60 * time.Second
	// The whole produce phase, failover included. The Go client asks the name server for
	// routes every 30 s (a fixed period, no option sets it), so it may take that long and
	// more to learn the new master.
	failoverProduceDeadline = 180 * time.Second
	// Pause before a failed message is sent again, as an application would back off.
	failoverRetryPause = 200 * time.Millisecond
	// At most this many missing bodies are named in a failure; the count is always given.
	failoverMissingListed = 50
	// RocketMQ request codes of the checks that no Go client API offers.
	codeGetAllTopicConfig = 21
	codeGetMaxOffset      = 30
	codeGetMinOffset      = 31
)

type failoverPhase struct {
	namesrv, topic, runID string
	master, slave, broker string
	count, holdAt         int
	acks, goFile          string
	env                   *env
}

// failoverMain runs one phase; it returns the process's exit status.
func failoverMain(argv []string) int {
	flags := flag.NewFlagSet("failover", flag.ContinueOnError)
	var f failoverPhase
	var phase string
	flags.StringVar(&f.namesrv, "namesrv", "", "name server address, HOST:PORT (required)")
	flags.StringVar(&phase, "phase", "", "setup, produce or consume (required)")
	flags.StringVar(&f.topic, "topic", "", "the topic (required)")
	flags.StringVar(&f.runID, "run-id", "", "the run's id, part of every message (required)")
	flags.StringVar(&f.master, "master", "", "setup: the master broker, HOST:PORT")
	flags.StringVar(&f.slave, "slave", "", "setup: the slave broker, HOST:PORT")
	flags.StringVar(&f.broker, "broker", "", "consume: the master broker now, HOST:PORT")
	flags.IntVar(&f.count, "count", 0, "produce, consume: how many messages the run sends")
	flags.IntVar(&f.holdAt, "hold-at", -1, "produce: wait for the go file before this message")
	flags.StringVar(&f.acks, "acks", "", "produce, consume: the acks file")
	flags.StringVar(&f.goFile, "go-file", "", "produce: the file the script creates after the kill")
	if err := flags.Parse(argv); err != nil {
		return 2
	}
	usage := func(why string) int {
		fmt.Fprintln(os.Stderr, "error:", why)
		flags.Usage()
		return 2
	}
	if flags.NArg() > 0 {
		return usage("unexpected argument " + flags.Arg(0))
	}
	for name, value := range map[string]string{"namesrv": f.namesrv, "phase": phase,
		"topic": f.topic, "run-id": f.runID} {
		if value == "" {
			return usage("--" + name + " is required")
		}
	}
	level := os.Getenv("COMPAT_GO_LOG")
	if level == "" {
		level = "error"
	}
	rlog.SetLogLevel(level)
	f.env = &env{namesrv: f.namesrv, runID: f.runID}

	var step string
	var run func() (string, error)
	var need []string
	switch phase {
	case "setup":
		step, run, need = "failover_go_create_topic", f.setup, []string{"master", "slave"}
	case "produce":
		step, run = "failover_go_send_through_failover", f.produce
		need = []string{"count", "acks", "hold-at", "go-file"}
	case "consume":
		step, run, need = "failover_go_push_every_SEND_OK", f.consume,
			[]string{"count", "acks", "broker"}
	default:
		return usage("--phase must be setup, produce or consume")
	}
	for _, name := range need {
		if !f.given(name) {
			return usage("--" + name + " is required in phase " + phase)
		}
	}
	start := time.Now()
	detail, err := run()
	ms := time.Since(start).Milliseconds()
	if err != nil {
		fmt.Printf("FAIL %-28s (%5d ms): %v\n", step, ms, err)
		fmt.Println("0 passed, 1 failed")
		return 1
	}
	fmt.Printf("PASS %-28s (%5d ms) %s\n", step, ms, detail)
	fmt.Println("1 passed, 0 failed")
	return 0
}

func (f *failoverPhase) given(name string) bool {
	switch name {
	case "master":
		return f.master != ""
	case "slave":
		return f.slave != ""
	case "broker":
		return f.broker != ""
	case "count":
		return f.count > 0
	case "hold-at":
		return f.holdAt >= 0 && f.holdAt < f.count
	case "acks":
		return f.acks != ""
	case "go-file":
		return f.goFile != ""
	}
	return false
}

// messages are the run's messages, the same on the sending and on the receiving side.
func (f *failoverPhase) messages() []*sent {
	return makeMessages(f.env, f.topic, f.count, tagsAB)
}

func (f *failoverPhase) setup() (string, error) {
	adm, err := admin.NewAdmin(admin.WithResolver(
		primitive.NewPassthroughResolver([]string{f.namesrv})))
	if err != nil {
		return "", fmt.Errorf("admin client: %w", err)
	}
	defer adm.Close()
	f.env.admin = adm
	f.env.broker = f.master
	if err := f.env.createTopic(f.topic); err != nil {
		return "", err
	}
	// The slave copies its master's topics periodically; once it holds the topic, a
	// promotion keeps it with its four queues whatever the kill interrupts.
	var lastErr error
	err = waitFor("the slave's copy of the master's topics to hold "+f.topic, failoverWait,
		func() bool {
			var held bool
			held, lastErr = brokerHoldsTopic(f.slave, f.topic)
			return held
		})
	if err != nil {
		return "", fmt.Errorf("%w (last answer: %v)", err, lastErr)
	}
	return fmt.Sprintf("%s on %s, copied by %s", f.topic, f.master, f.slave), nil
}

// brokerHoldsTopic asks the broker for all its topic configs (GET_ALL_TOPIC_CONFIG).
func brokerHoldsTopic(addr, topic string) (bool, error) {
	_, body, err := remotingCall(addr, codeGetAllTopicConfig, nil)
	if err != nil {
		return false, err
	}
	var wrapper struct {
		TopicConfigTable map[string]json.RawMessage `json:"topicConfigTable"`
	}
	if err := json.Unmarshal(body, &wrapper); err != nil {
		return false, fmt.Errorf("topic configs of %s: %w", addr, err)
	}
	_, held := wrapper.TopicConfigTable[topic]
	return held, nil
}

// storeHost is host:port of the broker that stored a message, from its offset msgId.
func storeHost(r *primitive.SendResult) string {
	id, err := primitive.UnmarshalMsgID([]byte(r.OffsetMsgID))
	if err != nil {
		return "unknown(" + r.OffsetMsgID + ")"
	}
	return net.JoinHostPort(id.Addr, strconv.Itoa(id.Port))
}

var failureDigits = regexp.MustCompile(`[0-9]+`)

func (f *failoverPhase) produce() (string, error) {
	out, err := os.OpenFile(f.acks, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", fmt.Errorf("acks file: %w", err)
	}
	defer out.Close()
	// The client's defaults but for the names: 3 s send timeout, 2 retries within a send.
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{f.namesrv})),
		producer.WithGroupName("failover_go_pg_"+f.runID),
		producer.WithInstanceName("failover_go_producer_"+f.runID),
	)
	if err != nil {
		return "", fmt.Errorf("producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return "", fmt.Errorf("producer start: %w", err)
	}
	defer p.Shutdown()
	deadline := time.Now().Add(failoverProduceDeadline)
	failedAttempts := 0
	retried := map[int]bool{}
	kinds := map[string]int{}
	record := func(format string, args ...interface{}) error {
		if _, err := fmt.Fprintf(out, format, args...); err != nil {
			return fmt.Errorf("acks file: %w", err)
		}
		return nil
	}
	for i, s := range f.messages() {
		if i == f.holdAt {
			err := waitFor(fmt.Sprintf("the go file %s before message %d", f.goFile, i),
				failoverWait, func() bool {
					_, err := os.Stat(f.goFile)
					return err == nil
				})
			if err != nil {
				return "", err
			}
		}
		for {
			if time.Now().After(deadline) {
				return "", fmt.Errorf("message %d not answered SEND_OK within %s of the start"+
					" (%d failed attempts: %s)", i, failoverProduceDeadline, failedAttempts,
					formatKinds(kinds))
			}
			// A new message each attempt: the client gives each its own message id.
			r, err := p.SendSync(context.Background(), s.message())
			var failure string
			switch {
			case err != nil:
				failure = err.Error()
			case r.Status != primitive.SendOK:
				failure = fmt.Sprintf("status %d", r.Status)
			default:
				failure = ""
			}
			now := time.Now().UnixMilli()
			if failure == "" {
				if err := record("OK %d %d %d %d %s\n", i, now, r.MessageQueue.QueueId,
					r.QueueOffset, storeHost(r)); err != nil {
					return "", err
				}
				break
			}
			failedAttempts++
			retried[i] = true
			kind := failureDigits.ReplaceAllString(failure, "N")
			if len(kind) > 80 {
				kind = kind[:80]
			}
			kinds[kind]++
			if err := record("ERR %d %d %s\n", i, now,
				strings.Join(strings.Fields(failure), " ")); err != nil {
				return "", err
			}
			time.Sleep(failoverRetryPause)
		}
	}
	if _, err := os.Stat(f.goFile); err != nil {
		return "", fmt.Errorf("the run ended without the go file %s", f.goFile)
	}
	return fmt.Sprintf("%d SEND_OK; %d failed attempts %s, %d message(s) sent more than once",
		f.count, failedAttempts, formatKinds(kinds), len(retried)), nil
}

// formatKinds lists failure kinds (digits replaced by N) with their counts, most first.
func formatKinds(kinds map[string]int) string {
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Slice(names, func(a, b int) bool {
		if kinds[names[a]] != kinds[names[b]] {
			return kinds[names[a]] > kinds[names[b]]
		}
		return names[a] < names[b]
	})
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%dx %q", kinds[k], k))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// readAcks gives the indexes answered SEND_OK and those with a failed attempt.
func readAcks(file string, count int) (acked, retried map[int]bool, err error) {
	in, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("acks file: %w", err)
	}
	defer in.Close()
	acked, retried = map[int]bool{}, map[int]bool{}
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		cells := strings.SplitN(lines.Text(), " ", 3)
		if len(cells) < 2 {
			continue
		}
		index, err := strconv.Atoi(cells[1])
		if err != nil || index < 0 || index >= count {
			return nil, nil, fmt.Errorf("unreadable line in %s: %q", file, lines.Text())
		}
		switch cells[0] {
		case "OK":
			// A second SEND_OK for one body would be the producer's fault, not a broker's.
			if acked[index] {
				return nil, nil, fmt.Errorf("message %d acked twice in %s", index, file)
			}
			acked[index] = true
		case "ERR":
			retried[index] = true
		default:
			return nil, nil, fmt.Errorf("unreadable line in %s: %q", file, lines.Text())
		}
	}
	if err := lines.Err(); err != nil {
		return nil, nil, fmt.Errorf("acks file: %w", err)
	}
	return acked, retried, nil
}

// storedCount is how many messages the topic's queues hold on the broker now (max minus min
// offset, summed), read with GET_MAX_OFFSET and GET_MIN_OFFSET.
func storedCount(broker, topic string) (int64, error) {
	var stored int64
	for q := 0; q < queues; q++ {
		var ends [2]int64
		for i, code := range []int{codeGetMinOffset, codeGetMaxOffset} {
			fields, _, err := remotingCall(broker, code,
				map[string]string{"topic": topic, "queueId": strconv.Itoa(q)})
			if err != nil {
				return 0, fmt.Errorf("offsets of queue %d on %s: %w", q, broker, err)
			}
			ends[i], err = strconv.ParseInt(fields["offset"], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("offsets of queue %d on %s: bad offset %q", q, broker,
					fields["offset"])
			}
		}
		stored += ends[1] - ends[0]
	}
	return stored, nil
}

func (f *failoverPhase) consume() (string, error) {
	acked, retried, err := readAcks(f.acks, f.count)
	if err != nil {
		return "", err
	}
	if len(acked) == 0 {
		return "", fmt.Errorf("no message was answered SEND_OK")
	}
	all := f.messages()
	var expected []*sent
	indexByCid := map[string]int{}
	for i, s := range all {
		if acked[i] {
			expected = append(expected, s)
			indexByCid[s.cid] = i
		}
	}
	stored, err := storedCount(f.broker, f.topic)
	if err != nil {
		return "", err
	}
	got := newCollector()
	pc, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{f.namesrv})),
		consumer.WithGroupName("failover_go_cg_"+f.runID),
		consumer.WithInstance("failover_go_consumer_"+f.runID),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return "", fmt.Errorf("push consumer: %w", err)
	}
	err = pc.Subscribe(f.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			got.add(msgs)
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return "", fmt.Errorf("subscribe: %w", err)
	}
	if err := pc.Start(); err != nil {
		return "", fmt.Errorf("push consumer start: %w", err)
	}
	defer pc.Shutdown()
	missing := func() []int {
		seen := map[string]bool{}
		for _, m := range got.arrivals() {
			seen[m.GetProperty("cid")] = true
		}
		var out []int
		for cid, i := range indexByCid {
			if !seen[cid] {
				out = append(out, i)
			}
		}
		sort.Ints(out)
		return out
	}
	if err := waitFor("every body answered SEND_OK", failoverWait,
		func() bool { return len(missing()) == 0 }); err != nil {
		gone := missing()
		listed := gone
		if len(listed) > failoverMissingListed {
			listed = listed[:failoverMissingListed]
		}
		return "", fmt.Errorf("%w: %d of %d SEND_OK bodies missing, messages %v", err,
			len(gone), len(indexByCid), listed)
	}
	// Messages stored by an attempt whose answer was lost are in the queues too; waiting for
	// them makes a duplicate of a body sent once show before the check.
	if err := waitFor(fmt.Sprintf("%d stored messages", stored), failoverWait,
		func() bool { return int64(len(got.arrivals())) >= stored }); err != nil {
		return "", fmt.Errorf("%w (%d arrived)", err, len(got.arrivals()))
	}
	arrivals := got.arrivals()
	times := map[string]int{}
	var ofAcked []*primitive.MessageExt
	var problems []string
	for _, m := range arrivals {
		cid := m.GetProperty("cid")
		index, err := strconv.Atoi(m.GetProperty("idx"))
		if err != nil || index < 0 || index >= len(all) {
			index = -1
		}
		sentAgain := index >= 0 && retried[index] && all[index].cid == cid
		_, wasAcked := indexByCid[cid]
		if !wasAcked && !sentAgain {
			problems = append(problems, fmt.Sprintf("message %d arrived but was never sent:"+
				" cid=%s id=%s", index, cid, m.MsgId))
			continue
		}
		times[cid]++
		if times[cid] == 2 && !sentAgain {
			problems = append(problems, fmt.Sprintf("message %d was sent once but arrived"+
				" twice", index))
		}
		if wasAcked && times[cid] == 1 {
			ofAcked = append(ofAcked, m)
		}
	}
	if len(problems) > 0 {
		shown := problems
		if len(shown) > 8 {
			shown = shown[:8]
		}
		return "", fmt.Errorf("%d problem(s): %s", len(problems), strings.Join(shown, "; "))
	}
	// Every first arrival's topic, body, tags, keys and properties against what was sent.
	intact, err := verify(expected, ofAcked, false)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (every SEND_OK body), %d deliveries of %d stored, %d duplicate(s);"+
		" %d body(ies) sent more than once", intact, len(arrivals), stored,
		len(arrivals)-len(times), len(retried)), nil
}

// remotingCall sends one RocketMQ remoting request with a JSON header on a fresh connection
// and returns the answer's header fields and body; an answer code other than 0 is an error.
func remotingCall(addr string, code int, fields map[string]string) (map[string]string, []byte,
	error) {
	header := map[string]interface{}{"code": code, "flag": 0, "language": "GO", "opaque": 1,
		"serializeTypeCurrentRPC": "JSON", "version": 513}
	if fields != nil {
		header["extFields"] = fields
	}
	encoded, err := json.Marshal(header)
	if err != nil {
		return nil, nil, err
	}
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, nil, err
	}
	frame := make([]byte, 8+len(encoded))
	binary.BigEndian.PutUint32(frame[0:4], uint32(4+len(encoded)))
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(encoded)))
	copy(frame[8:], encoded)
	if _, err := conn.Write(frame); err != nil {
		return nil, nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, nil, err
	}
	total := binary.BigEndian.Uint32(size[:])
	if total < 4 || total > 64<<20 {
		return nil, nil, fmt.Errorf("bad frame length %d from %s", total, addr)
	}
	answer := make([]byte, total)
	if _, err := io.ReadFull(conn, answer); err != nil {
		return nil, nil, err
	}
	headerLen := binary.BigEndian.Uint32(answer[0:4]) & 0xFFFFFF
	if int(headerLen) > len(answer)-4 {
		return nil, nil, fmt.Errorf("bad header length %d from %s", headerLen, addr)
	}
	var reply struct {
		Code      int               `json:"code"`
		Remark    string            `json:"remark"`
		ExtFields map[string]string `json:"extFields"`
	}
	if err := json.Unmarshal(answer[4:4+headerLen], &reply); err != nil {
		return nil, nil, fmt.Errorf("answer header from %s: %w", addr, err)
	}
	if reply.Code != 0 {
		return nil, nil, fmt.Errorf("code %d from %s: %s", reply.Code, addr, reply.Remark)
	}
	return reply.ExtFields, answer[4+headerLen:], nil
}
