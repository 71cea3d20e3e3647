package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// The shortest delay level (1 s) keeps the retry round trip well inside the test's budget.
const retryDelayLevel = 1

// retry: COUNT messages to TOPIC, consumed by a clustering push consumer that asks for a retry
// the first time it sees each message and succeeds the second time; then COUNT messages to
// TOPIC+"Broadcast", consumed by two broadcasting consumers of one group.
func retry(namesrv, topic, group string, count int) map[string]interface{} {
	broadcastTopic := topic + "Broadcast"
	p := startProducer(namesrv, group)
	// The topic must exist before a consumer can subscribe to it.
	_, err := p.SendSync(context.Background(), message(topic, "setup", "setup", -1, "setup"))
	must(err, "creating "+topic)
	primeRetryTopic(namesrv, topic, group)
	for i := 0; i < count; i++ {
		_, err = p.SendSync(context.Background(),
			message(topic, "retry", fmt.Sprintf("key-%d", i), i, fmt.Sprintf("body-%d", i)))
		must(err, fmt.Sprintf("send %d", i))
	}
	for i := 0; i < count; i++ {
		_, err := p.SendSync(context.Background(),
			message(broadcastTopic, "broadcast", fmt.Sprintf("key-%d", i), i, fmt.Sprintf("cast-%d", i)))
		must(err, fmt.Sprintf("broadcast send %d", i))
	}
	shutdown("the producer", p)

	var mu sync.Mutex
	seen := map[string][]int32{}
	succeeded := 0
	c := newPushConsumer(namesrv, group, group+"-retry",
		consumer.WithConsumerModel(consumer.Clustering))
	must(c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "retry"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				seq := m.GetProperty("seq")
				seen[seq] = append(seen[seq], m.ReconsumeTimes)
				if len(seen[seq]) == 1 {
					result = consumer.ConsumeRetryLater
				} else if len(seen[seq]) == 2 {
					succeeded++
				}
			}
			if result == consumer.ConsumeRetryLater {
				concurrently, ok := primitive.GetConcurrentlyCtx(ctx)
				if ok {
					concurrently.DelayLevelWhenNextConsume = retryDelayLevel
				}
			}
			return result, nil
		}), "subscribing "+topic)
	must(c.Start(), "starting the retrying consumer")
	waitFor(fmt.Sprintf("%d messages consumed on their retry", count), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return succeeded >= count
	})
	shutdown("the retrying consumer", c)

	broadcast := map[string][]int{}
	collectors := []*collector{{}, {}}
	consumers := make([]interface{ Shutdown() error }, 0, len(collectors))
	for n, received := range collectors {
		received := received
		b := newPushConsumer(namesrv, group+"-broadcast", fmt.Sprintf("%s-broadcast-%d", group, n+1),
			consumer.WithConsumerModel(consumer.BroadCasting))
		must(b.Subscribe(broadcastTopic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				received.add(msgs...)
				return consumer.ConsumeSuccess, nil
			}), "subscribing "+broadcastTopic)
		must(b.Start(), fmt.Sprintf("starting broadcasting consumer %d", n+1))
		consumers = append(consumers, b)
	}
	waitFor(fmt.Sprintf("%d messages on each broadcasting consumer", count), func() bool {
		return collectors[0].size() >= count && collectors[1].size() >= count
	})
	for n, b := range consumers {
		shutdown(fmt.Sprintf("broadcasting consumer %d", n+1), b)
	}
	for n, received := range collectors {
		broadcast[fmt.Sprintf("consumer-%d", n+1)] = received.sortedSeqs()
	}

	mu.Lock()
	defer mu.Unlock()
	return map[string]interface{}{
		"reconsumeTimesSeen": seen,
		"broadcastConsumed":  broadcast,
	}
}

// primeRetryTopic has the broker create the group's retry topic (a consumer's heartbeat does)
// before the measured consumer starts: the Go client reads routes when it starts and then only
// every 30 s, so a retry topic born later would hold the retries back for that long.
func primeRetryTopic(namesrv, topic, group string) {
	c := newPushConsumer(namesrv, group, group+"-primer",
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset))
	must(c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "none"},
		func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			return consumer.ConsumeSuccess, nil
		}), "subscribing the primer to "+topic)
	must(c.Start(), "starting the primer")
	shutdown("the primer", c)
}
