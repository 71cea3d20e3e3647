// Command driver runs one conformance scenario with the official Go client
// (github.com/apache/rocketmq-client-go/v2) and prints one normalised JSON transcript line:
// what was sent and delivered, to which queue, in which order, without message ids, hosts or
// times, so that the same scenario run against Apache RocketMQ and against pocketmq can be
// compared line for line.
//
// Usage:
//
//	driver produce-consume NAMESRV TOPIC GROUP COUNT
//	driver retry NAMESRV TOPIC GROUP COUNT
//	driver pull NAMESRV TOPIC GROUP COUNT
//
// Every wait is bounded; on a timeout the driver says what it was waiting for on stderr and
// exits 1.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const (
	waitLimit = 60 * time.Second
	// A late duplicate delivered within this grace period shows in the transcript.
	duplicateGrace = 500 * time.Millisecond
	sendTimeout    = 10 * time.Second
)

var scenarios = map[string]func(namesrv, topic, group string, count int) map[string]interface{}{
	"produce-consume": produceConsume,
	"retry":           retry,
	"pull":            pull,
}

func main() {
	// The transcript is the only thing on stdout; the client's chatter would hide it.
	rlog.SetLogLevel("error")
	if len(os.Args) != 6 || scenarios[os.Args[1]] == nil {
		fail("usage: driver produce-consume|retry|pull NAMESRV TOPIC GROUP COUNT")
	}
	count, err := strconv.Atoi(os.Args[5])
	if err != nil || count <= 0 {
		fail("COUNT must be a positive integer, got %q", os.Args[5])
	}
	transcript := scenarios[os.Args[1]](os.Args[2], os.Args[3], os.Args[4], count)
	line, err := json.Marshal(transcript)
	if err != nil {
		fail("encoding the transcript: %v", err)
	}
	fmt.Println(string(line))
	os.Exit(0)
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "driver: "+format+"\n", args...)
	os.Exit(1)
}

func must(err error, doing string) {
	if err != nil {
		fail("%s: %v", doing, err)
	}
}

// waitFor polls done until it holds or waitLimit passes; then the driver fails naming what.
func waitFor(what string, done func() bool) {
	deadline := time.Now().Add(waitLimit)
	for !done() {
		if time.Now().After(deadline) {
			fail("timed out after %s waiting for %s", waitLimit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(duplicateGrace)
}

var sendStatusNames = map[primitive.SendStatus]string{
	primitive.SendOK:                "SEND_OK",
	primitive.SendFlushDiskTimeout:  "FLUSH_DISK_TIMEOUT",
	primitive.SendFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	primitive.SendSlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
	primitive.SendUnknownError:      "UNKNOWN_ERROR",
}

var pullStatusNames = map[primitive.PullStatus]string{
	primitive.PullFound:         "FOUND",
	primitive.PullNoNewMsg:      "NO_NEW_MSG",
	primitive.PullNoMsgMatched:  "NO_MATCHED_MSG",
	primitive.PullOffsetIllegal: "OFFSET_ILLEGAL",
	primitive.PullBrokerTimeout: "BROKER_TIMEOUT",
}

const orderProperty = "orderId"

// orderSelector sends a message carrying orderProperty to queue orderId modulo the queue
// count, as the Java client's MessageQueueSelector examples do; other messages go round robin.
type orderSelector struct {
	fallback producer.QueueSelector
}

func (s orderSelector) Select(
	msg *primitive.Message, queues []*primitive.MessageQueue, lastBrokerName string,
) *primitive.MessageQueue {
	order := msg.GetProperty(orderProperty)
	if order == "" {
		return s.fallback.Select(msg, queues, lastBrokerName)
	}
	id, err := strconv.Atoi(order)
	if err != nil {
		fail("bad %s property %q", orderProperty, order)
	}
	sorted := append([]*primitive.MessageQueue(nil), queues...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].QueueId < sorted[j].QueueId })
	return sorted[id%len(sorted)]
}

func resolver(namesrv string) primitive.NsResolver {
	return primitive.NewPassthroughResolver([]string{namesrv})
}

func startProducer(namesrv, group string) rocketmq.Producer {
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(resolver(namesrv)),
		producer.WithGroupName(group+"-producer"),
		producer.WithInstanceName(group+"-producer"),
		producer.WithSendMsgTimeout(sendTimeout),
		producer.WithRetry(2),
		producer.WithQueueSelector(orderSelector{producer.NewRoundRobinQueueSelector()}),
	)
	must(err, "creating the producer")
	must(p.Start(), "starting the producer")
	return p
}

func newPushConsumer(namesrv, group, instance string, opts ...consumer.Option) rocketmq.PushConsumer {
	all := append([]consumer.Option{
		consumer.WithNsResolver(resolver(namesrv)),
		consumer.WithGroupName(group),
		consumer.WithInstance(instance),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
	c, err := rocketmq.NewPushConsumer(all...)
	must(err, "creating push consumer "+instance)
	return c
}

// message builds a message with a tag, a key and the user property seq.
func message(topic, tag, key string, seq int, body string) *primitive.Message {
	m := primitive.NewMessage(topic, []byte(body))
	m.WithTag(tag)
	m.WithKeys([]string{key})
	m.WithProperty("seq", strconv.Itoa(seq))
	return m
}

// entry is what a transcript keeps of a delivered message.
func entry(m *primitive.MessageExt) map[string]interface{} {
	return map[string]interface{}{
		"body":           string(m.Body),
		"tags":           m.GetTags(),
		"keys":           m.GetKeys(),
		"seq":            m.GetProperty("seq"),
		"topic":          m.Topic,
		"reconsumeTimes": m.ReconsumeTimes,
	}
}

// collector gathers what listeners see from the client's goroutines.
type collector struct {
	mu       sync.Mutex
	messages []*primitive.MessageExt
}

func (c *collector) add(msgs ...*primitive.MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.messages = append(c.messages, msgs...)
}

func (c *collector) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.messages)
}

// sortedEntries lists the messages by topic, then seq, then reconsume times.
func (c *collector) sortedEntries() []map[string]interface{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	entries := make([]map[string]interface{}, 0, len(c.messages))
	for _, m := range c.messages {
		entries = append(entries, entry(m))
	}
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a["topic"] != b["topic"] {
			return a["topic"].(string) < b["topic"].(string)
		}
		sa, _ := strconv.Atoi(a["seq"].(string))
		sb, _ := strconv.Atoi(b["seq"].(string))
		if sa != sb {
			return sa < sb
		}
		return a["reconsumeTimes"].(int32) < b["reconsumeTimes"].(int32)
	})
	return entries
}

func (c *collector) sortedSeqs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	seqs := make([]int, 0, len(c.messages))
	for _, m := range c.messages {
		seq, _ := strconv.Atoi(m.GetProperty("seq"))
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	return seqs
}

func shutdown(what string, s interface{ Shutdown() error }) {
	must(s.Shutdown(), "shutting down "+what)
}

func background() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), waitLimit)
}
