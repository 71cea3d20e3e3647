package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

var tags = []string{"TagA", "TagB", "TagC"}

const (
	orders    = 4
	batchSize = 10
)

// produceConsume: COUNT sync sends with tags, keys and a user property and one async send to
// TOPIC; one batch send to TOPIC+"Batch"; COUNT sends ordered by a queue selector to
// TOPIC+"Ordered". Then a clustering push consumer takes TagA || TagB from TOPIC and everything
// from the batch topic, and an orderly push consumer takes the ordered topic.
func produceConsume(namesrv, topic, group string, count int) map[string]interface{} {
	batchTopic, orderedTopic := topic+"Batch", topic+"Ordered"
	p := startProducer(namesrv, group)
	statuses := map[string]int{}
	queues := map[int]bool{}
	expected := 0
	for i := 0; i < count; i++ {
		tag := tags[i%len(tags)]
		result, err := p.SendSync(context.Background(),
			message(topic, tag, fmt.Sprintf("key-%d", i), i, fmt.Sprintf("body-%d", i)))
		must(err, fmt.Sprintf("sync send %d", i))
		statuses[sendStatusNames[result.Status]]++
		queues[result.MessageQueue.QueueId] = true
		if tag != "TagC" {
			expected++
		}
	}

	asyncStatus := make(chan string, 1)
	err := p.SendAsync(context.Background(),
		func(_ context.Context, result *primitive.SendResult, err error) {
			must(err, "async send")
			asyncStatus <- sendStatusNames[result.Status]
		},
		message(topic, "TagA", "key-async", count, "body-async"))
	must(err, "starting the async send")
	expected++

	batch := make([]*primitive.Message, 0, batchSize)
	for i := 0; i < batchSize; i++ {
		batch = append(batch, message(batchTopic, "batch", fmt.Sprintf("b-key-%d", i), i,
			fmt.Sprintf("b-%d", i)))
	}
	batchResult, err := p.SendSync(context.Background(), batch...)
	must(err, "batch send")
	expected += batchSize

	orderedSentTo := map[string]int{}
	for i := 0; i < count; i++ {
		m := message(orderedTopic, fmt.Sprintf("order-%d", i%orders), fmt.Sprintf("seq-%d", i), i,
			fmt.Sprintf("step-%d", i))
		m.WithProperty(orderProperty, strconv.Itoa(i%orders))
		result, err := p.SendSync(context.Background(), m)
		must(err, fmt.Sprintf("ordered send %d", i))
		orderedSentTo[fmt.Sprintf("%03d", i)] = result.MessageQueue.QueueId
	}
	var asyncAnswer string
	select {
	case asyncAnswer = <-asyncStatus:
	case <-time.After(waitLimit):
		fail("timed out after %s waiting for the async send's callback", waitLimit)
	}
	shutdown("the producer", p)

	received := &collector{}
	c := newPushConsumer(namesrv, group, group+"-clustering",
		consumer.WithConsumerModel(consumer.Clustering))
	listener := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		received.add(msgs...)
		return consumer.ConsumeSuccess, nil
	}
	must(c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "TagA || TagB"},
		listener), "subscribing "+topic)
	must(c.Subscribe(batchTopic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		listener), "subscribing "+batchTopic)
	must(c.Start(), "starting the clustering consumer")
	waitFor(fmt.Sprintf("%d messages on the clustering consumer", expected),
		func() bool { return received.size() >= expected })
	shutdown("the clustering consumer", c)

	orderly := &collector{}
	o := newPushConsumer(namesrv, group+"-orderly", group+"-orderly",
		consumer.WithConsumerModel(consumer.Clustering), consumer.WithConsumerOrder(true))
	must(o.Subscribe(orderedTopic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			orderly.add(msgs...)
			return consumer.ConsumeSuccess, nil
		}), "subscribing "+orderedTopic)
	must(o.Start(), "starting the orderly consumer")
	waitFor(fmt.Sprintf("%d messages on the orderly consumer", count),
		func() bool { return orderly.size() >= count })
	shutdown("the orderly consumer", o)

	perQueue := map[string][]int{}
	orderly.mu.Lock()
	for _, m := range orderly.messages {
		seq, _ := strconv.Atoi(m.GetProperty("seq"))
		queue := strconv.Itoa(m.Queue.QueueId)
		perQueue[queue] = append(perQueue[queue], seq)
	}
	orderly.mu.Unlock()

	queueIds := make([]int, 0, len(queues))
	for id := range queues {
		queueIds = append(queueIds, id)
	}
	sort.Ints(queueIds)
	return map[string]interface{}{
		"sendStatuses":            statuses,
		"queuesUsed":              len(queueIds),
		"asyncStatus":             asyncAnswer,
		"batchStatus":             sendStatusNames[batchResult.Status],
		"orderedSentTo":           orderedSentTo,
		"consumed":                received.sortedEntries(),
		"orderlyConsumedPerQueue": perQueue,
	}
}
