package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const pullBatch = 8

// pull: COUNT messages to TOPIC round robin, then a pull consumer reads every queue from
// offset 0 until the broker has nothing more, a few messages per request.
func pull(namesrv, topic, group string, count int) map[string]interface{} {
	p := startProducer(namesrv, group)
	for i := 0; i < count; i++ {
		_, err := p.SendSync(context.Background(),
			message(topic, tags[i%len(tags)], fmt.Sprintf("key-%d", i), i, fmt.Sprintf("body-%d", i)))
		must(err, fmt.Sprintf("send %d", i))
	}
	shutdown("the producer", p)

	c, err := rocketmq.NewPullConsumer(
		consumer.WithNsResolver(resolver(namesrv)),
		consumer.WithGroupName(group),
		consumer.WithInstance(group+"-pull"),
	)
	must(err, "creating the pull consumer")
	must(c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}),
		"subscribing "+topic)
	must(c.Start(), "starting the pull consumer")
	queues, err := c.GetTopicRouteInfo(topic)
	must(err, "routing "+topic)
	sorted := append([]*primitive.MessageQueue(nil), queues...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].QueueId < sorted[j].QueueId })

	perQueue := map[string]interface{}{}
	for _, queue := range sorted {
		messages := []map[string]interface{}{}
		offset, maxOffset := int64(0), int64(1)
		// Each request advances by at least one message or fails the driver. Pulling at the
		// end of a queue would park the request on the broker for its whole long-polling
		// time, so the loop stops at the queue's max offset instead.
		for requests := 0; offset < maxOffset; requests++ {
			if requests > count/pullBatch+2 {
				fail("queue %d still had messages after %d requests", queue.QueueId, requests)
			}
			result := pullOnce(c, queue, offset)
			if result.Status != primitive.PullFound || result.NextBeginOffset <= offset {
				fail("pulling queue %d from %d: %s, next %d", queue.QueueId, offset,
					pullStatusNames[result.Status], result.NextBeginOffset)
			}
			for _, m := range result.GetMessageExts() {
				e := entry(m)
				e["queueOffset"] = m.QueueOffset
				messages = append(messages, e)
			}
			offset, maxOffset = result.NextBeginOffset, result.MaxOffset
		}
		// Past the end the broker answers at once (offset moved) instead of holding the request.
		beyond := pullOnce(c, queue, maxOffset+5)
		perQueue[strconv.Itoa(queue.QueueId)] = map[string]interface{}{
			"messages":              messages,
			"maxOffset":             maxOffset,
			"beyondEndStatus":       pullStatusNames[beyond.Status],
			"beyondEndNextOffset":   beyond.NextBeginOffset,
			"beyondEndMessageCount": len(beyond.GetMessageExts()),
		}
	}
	shutdown("the pull consumer", c)
	return map[string]interface{}{"pulledPerQueue": perQueue}
}

func pullOnce(c rocketmq.PullConsumer, queue *primitive.MessageQueue, offset int64) *primitive.PullResult {
	ctx, cancel := background()
	defer cancel()
	result, err := c.PullFrom(ctx, queue, offset, pullBatch)
	must(err, fmt.Sprintf("pulling queue %d from %d", queue.QueueId, offset))
	return result
}
