// Drives the official 5.x Go client (github.com/apache/rocketmq-clients/golang/v5, gRPC)
// through one scenario against a proxy, printing JSON lines as python5_client.py does (the
// same scenarios, line and summary shapes). Version 5.1.2 has no PushConsumer: the push
// scenarios are not offered.
//
//	driver SCENARIO PROXY TOPIC GROUP [COUNT]
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

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

const wait = 60 * time.Second

var printing sync.Mutex

func say(line map[string]interface{}) {
	printing.Lock()
	defer printing.Unlock()
	data, _ := json.Marshal(line)
	fmt.Println(string(data))
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func config(proxy, group string) *rmq.Config {
	return &rmq.Config{
		Endpoint:      proxy,
		ConsumerGroup: group,
		Credentials:   &credentials.SessionCredentials{},
	}
}

func seen(view *rmq.MessageView, phase string) map[string]interface{} {
	keys := append([]string{}, view.GetKeys()...)
	sort.Strings(keys)
	properties := map[string]string{}
	for k, v := range view.GetProperties() {
		properties[k] = v
	}
	line := map[string]interface{}{
		"message_id": view.GetMessageId(),
		"body":       string(view.GetBody()),
		"tag":        view.GetTag(),
		"keys":       keys,
		"properties": properties,
		"attempt":    view.GetDeliveryAttempt(),
		"group":      view.GetMessageGroup(),
		"handle":     view.GetReceiptHandle(),
		"t":          float64(time.Now().UnixMilli()) / 1000,
	}
	if phase != "" {
		line["phase"] = phase
	}
	say(line)
	return line
}

func message(topic, body, group string, deliverAt int64) *rmq.Message {
	msg := &rmq.Message{Topic: topic, Body: []byte(body)}
	msg.SetTag("TagA")
	msg.SetKeys("key-" + body)
	msg.AddProperty("origin", "go5")
	if group != "" {
		msg.SetMessageGroup(group)
	}
	if deliverAt > 0 {
		msg.SetDelayTimestamp(time.Unix(deliverAt, 0))
	}
	return msg
}

func produce(proxy, topic string, count int, fifo bool, deliverAt int64) []string {
	producer, err := rmq.NewProducer(config(proxy, ""), rmq.WithTopics(topic))
	must(err, "creating the producer")
	must(producer.Start(), "starting the producer")
	defer producer.GracefulStop()
	ids := []string{}
	for i := 0; i < count; i++ {
		group := ""
		if fifo {
			group = "g" + strconv.Itoa(i%3)
		}
		receipts, err := producer.Send(context.Background(), message(topic, "m"+strconv.Itoa(i), group, deliverAt))
		must(err, "sending")
		ids = append(ids, receipts[0].MessageID)
	}
	return ids
}

func simple(proxy, topic, group string, await time.Duration) rmq.SimpleConsumer {
	consumer, err := rmq.NewSimpleConsumer(config(proxy, group),
		rmq.WithAwaitDuration(await),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	must(err, "creating the consumer")
	must(consumer.Start(), "starting the consumer")
	return consumer
}

func receiveBatch(consumer rmq.SimpleConsumer, max int32, invisible time.Duration) []*rmq.MessageView {
	views, err := consumer.Receive(context.Background(), max, invisible)
	if err != nil {
		return nil // MESSAGE_NOT_FOUND is an error to this client
	}
	return views
}

func receiveAll(proxy, topic, group string, count int) []string {
	consumer := simple(proxy, topic, group, 5*time.Second)
	defer consumer.GracefulStop()
	got := []string{}
	deadline := time.Now().Add(wait)
	for len(got) < count && time.Now().Before(deadline) {
		for _, view := range receiveBatch(consumer, 16, 15*time.Second) {
			got = append(got, seen(view, "")["message_id"].(string))
			must(consumer.Ack(context.Background(), view), "acking")
		}
	}
	return got
}

func receiveOne(consumer rmq.SimpleConsumer, deadline time.Time) *rmq.MessageView {
	for time.Now().Before(deadline) {
		if views := receiveBatch(consumer, 1, 30*time.Second); len(views) > 0 {
			return views[0]
		}
	}
	must(fmt.Errorf("timed out"), "receiving")
	return nil
}

func redeliver(proxy, topic, group string) map[string]interface{} {
	consumer := simple(proxy, topic, group, 5*time.Second)
	defer consumer.GracefulStop()
	deadline := time.Now().Add(wait)
	first := receiveOne(consumer, deadline)
	firstAttempt := first.GetDeliveryAttempt()
	firstHandle := first.GetReceiptHandle()
	seen(first, "first")
	must(consumer.ChangeInvisibleDuration(first, time.Second), "changing the invisible time")
	changedAt := time.Now()
	again := receiveOne(consumer, deadline)
	seen(again, "again")
	must(consumer.Ack(context.Background(), again), "acking")
	var stale interface{}
	if err := consumer.Ack(context.Background(), first); err != nil {
		stale = "error"
	}
	return map[string]interface{}{
		"same_message": first.GetMessageId() == again.GetMessageId(),
		"attempts":     []int32{firstAttempt, again.GetDeliveryAttempt()},
		"back_after_s": time.Since(changedAt).Seconds(),
		"stale_ack":    stale,
		"handles":      []string{firstHandle, again.GetReceiptHandle()},
	}
}

func deadLetter(proxy, topic, group string) []int32 {
	consumer := simple(proxy, topic, group, 3*time.Second)
	defer consumer.GracefulStop()
	attempts := []int32{}
	deadline := time.Now().Add(wait)
	var last time.Time
	for time.Now().Before(deadline) {
		views := receiveBatch(consumer, 1, 10*time.Second)
		if len(views) == 0 {
			// 3 s without a redelivery, where one takes milliseconds.
			if len(attempts) > 0 && time.Since(last) >= 3*time.Second {
				break
			}
			continue
		}
		last = time.Now()
		seen(views[0], "")
		attempts = append(attempts, views[0].GetDeliveryAttempt())
		must(consumer.ChangeInvisibleDuration(views[0], 0), "changing the invisible time")
	}
	return attempts
}

func transaction(proxy, topic, group string) []string {
	var mu sync.Mutex
	checked := []string{}
	checker := &rmq.TransactionChecker{Check: func(view *rmq.MessageView) rmq.TransactionResolution {
		mu.Lock()
		defer mu.Unlock()
		checked = append(checked, string(view.GetBody()))
		say(map[string]interface{}{"checked": string(view.GetBody())})
		return rmq.COMMIT
	}}
	producer, err := rmq.NewProducer(config(proxy, ""), rmq.WithTopics(topic), rmq.WithTransactionChecker(checker))
	must(err, "creating the producer")
	must(producer.Start(), "starting the producer")
	defer producer.GracefulStop()
	for _, body := range []string{"commit", "rollback", "orphan"} {
		tx := producer.BeginTransaction()
		_, err := producer.SendWithTransaction(context.Background(), message(topic, body, "", 0), tx)
		must(err, "sending a half")
		switch body {
		case "commit":
			must(tx.Commit(), "committing")
		case "rollback":
			must(tx.RollBack(), "rolling back")
		}
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := len(checked) > 0
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The client answers a check on its own once the checker returns: the producer stays up
	// until the orphan's commit can be read (by a group of its own), or stopping it could cut
	// the answer off and leave the orphan a half with no producer to ask.
	probe := simple(proxy, topic, group+"-probe", 5*time.Second)
	defer probe.GracefulStop()
	for committed := false; !committed && time.Now().Before(deadline); {
		for _, view := range receiveBatch(probe, 16, 15*time.Second) {
			committed = committed || string(view.GetBody()) == "orphan"
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]string{}, checked...)
}

func main() {
	os.Setenv("mq.consoleAppender.enabled", "false")
	rmq.ResetLogger()
	scenario, proxy, topic, group := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	count := 3
	if len(os.Args) > 5 {
		count, _ = strconv.Atoi(os.Args[5])
	}
	summary := map[string]interface{}{}
	switch scenario {
	case "produce":
		summary["sent"] = produce(proxy, topic, count, false, 0)
	case "fifo":
		summary["sent"] = produce(proxy, topic, count, true, 0)
	case "delay":
		at := time.Now().Unix() + 2
		summary["sent"] = produce(proxy, topic, count, false, at)
		summary["at"] = at
	case "receive":
		summary["received"] = receiveAll(proxy, topic, group, count)
	case "redeliver":
		summary = redeliver(proxy, topic, group)
	case "dead-letter":
		summary["attempts"] = deadLetter(proxy, topic, group)
	case "transaction":
		summary["checked"] = transaction(proxy, topic, group)
	default:
		must(fmt.Errorf("unknown scenario %s", scenario), "starting")
	}
	say(map[string]interface{}{"summary": summary})
	os.Exit(0)
}
