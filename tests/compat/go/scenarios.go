package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

var tagsAB = []string{"TagA", "TagB"}

func newProducer(e *env, scenario string) (rocketmq.Producer, error) {
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{e.namesrv})),
		producer.WithGroupName(e.name("pg", scenario)),
		producer.WithInstanceName(e.name("prod", scenario)),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10*time.Second),
	)
	if err != nil {
		return nil, err
	}
	return p, p.Start()
}

// newPushConsumer starts a push consumer member; members of one group need distinct instance
// names, or they would share a client id and the broker would count them as one.
func newPushConsumer(e *env, group, member, topic, expr string, c *collector) (rocketmq.PushConsumer, error) {
	pc, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{e.namesrv})),
		consumer.WithGroupName(group),
		consumer.WithInstance(group+"_"+member),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return nil, err
	}
	err = pc.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expr},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			c.add(msgs)
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return nil, err
	}
	return pc, pc.Start()
}

// consumeAll checks with one push consumer that every sent message arrives intact.
func consumeAll(e *env, scenario, topic string, msgs []*sent) (string, error) {
	c := newCollector()
	pc, err := newPushConsumer(e, e.name("cg", scenario), "m1", topic, "*", c)
	if err != nil {
		return "", fmt.Errorf("push consumer: %w", err)
	}
	defer pc.Shutdown()
	if err := waitFor(fmt.Sprintf("%d messages", len(msgs)), arrivalTimeout,
		func() bool { return c.count() >= len(msgs) }); err != nil {
		return "", fmt.Errorf("%w (got %d)", err, c.count())
	}
	return verify(msgs, c.arrivals(), false)
}

func producerSync(e *env, name string) (string, error) {
	topic := e.name("t", name)
	if err := e.createTopic(topic); err != nil {
		return "", err
	}
	p, err := newProducer(e, name)
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	msgs := makeMessages(e, topic, 200, tagsAB)
	last := map[int]int64{}
	for _, s := range msgs {
		r, err := p.SendSync(context.Background(), s.message())
		if err := checkResult(r, err); err != nil {
			return "", err
		}
		q := r.MessageQueue.QueueId
		if prev, ok := last[q]; ok && r.QueueOffset != prev+1 {
			return "", fmt.Errorf("queue %d offsets not consecutive: %d then %d", q, prev, r.QueueOffset)
		}
		last[q] = r.QueueOffset
	}
	return consumeAll(e, name, topic, msgs)
}

func producerAsync(e *env, name string) (string, error) {
	topic := e.name("t", name)
	if err := e.createTopic(topic); err != nil {
		return "", err
	}
	p, err := newProducer(e, name)
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	msgs := makeMessages(e, topic, 200, tagsAB)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, s := range msgs {
		wg.Add(1)
		err := p.SendAsync(context.Background(), func(ctx context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			if err := checkResult(r, err); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}, s.message())
		if err != nil {
			wg.Done()
			return "", fmt.Errorf("async send refused: %w", err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("async callbacks did not all arrive in 30 s")
	}
	if firstErr != nil {
		return "", firstErr
	}
	return consumeAll(e, name, topic, msgs)
}

func producerBatch(e *env, name string) (string, error) {
	topic := e.name("t", name)
	if err := e.createTopic(topic); err != nil {
		return "", err
	}
	p, err := newProducer(e, name)
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	msgs := makeMessages(e, topic, 200, tagsAB)
	for from := 0; from < len(msgs); from += 50 {
		batch := make([]*primitive.Message, 0, 50)
		for _, s := range msgs[from : from+50] {
			batch = append(batch, s.message())
		}
		// For a batch the Go client leaves MsgID empty and reports the broker's
		// comma-separated offset ids, one per message.
		r, err := p.SendSync(context.Background(), batch...)
		if err != nil {
			return "", fmt.Errorf("batch at %d: %w", from, err)
		}
		if r.Status != primitive.SendOK || len(strings.Split(r.OffsetMsgID, ",")) != len(batch) {
			return "", fmt.Errorf("batch at %d: bad result status=%d with %d offset ids", from,
				r.Status, len(strings.Split(r.OffsetMsgID, ",")))
		}
	}
	return consumeAll(e, name, topic, msgs)
}

// pushClustering: two members of one group split the queues; every TagA/TagB message sent
// after both started arrives at one of them, each member gets some, TagC is filtered out.
func pushClustering(e *env, name string) (string, error) {
	topic := e.name("t", name)
	if err := e.createTopic(topic); err != nil {
		return "", err
	}
	group := e.name("cg", name)
	a, b := newCollector(), newCollector()
	ca, err := newPushConsumer(e, group, "a", topic, "TagA || TagB", a)
	if err != nil {
		return "", fmt.Errorf("member a: %w", err)
	}
	defer ca.Shutdown()
	cb, err := newPushConsumer(e, group, "b", topic, "TagA || TagB", b)
	if err != nil {
		return "", fmt.Errorf("member b: %w", err)
	}
	defer cb.Shutdown()
	// The Go client exposes no assignment, so give the broker's "consumer ids changed"
	// notification and the resulting rebalance a moment; clustering is at-least-once and the
	// check allows duplicates, so a later rebalance does not fail the scenario.
	time.Sleep(3 * time.Second)
	p, err := newProducer(e, name)
	if err != nil {
		return "", err
	}
	defer p.Shutdown()
	msgs := makeMessages(e, topic, 300, []string{"TagA", "TagB", "TagC"})
	var expected []*sent
	for _, s := range msgs {
		if err := checkResult(p.SendSync(context.Background(), s.message())); err != nil {
			return "", err
		}
		if s.tags != "TagC" {
			expected = append(expected, s)
		}
	}
	union := func() int {
		seen := map[string]bool{}
		for _, m := range append(a.arrivals(), b.arrivals()...) {
			seen[m.GetProperty("cid")] = true
		}
		return len(seen)
	}
	if err := waitFor(fmt.Sprintf("%d messages across both members", len(expected)), arrivalTimeout,
		func() bool { return union() >= len(expected) }); err != nil {
		return "", fmt.Errorf("%w (got %d)", err, union())
	}
	time.Sleep(500 * time.Millisecond) // lets a wrongly delivered TagC message show up
	detail, err := verify(expected, append(a.arrivals(), b.arrivals()...), true)
	if err != nil {
		return "", err
	}
	if a.count() == 0 || b.count() == 0 {
		return "", fmt.Errorf("queues not split: member a got %d, member b got %d", a.count(), b.count())
	}
	return fmt.Sprintf("%s, split %d/%d", detail, a.count(), b.count()), nil
}
