import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Conformance scenario: messages with delay level 1 (one second) beside plain ones; then a
 * consumer that fails every message, asking for the next try after one second (delay level 1),
 * with `maxReconsumeTimes` 2, so each message is tried three times and then goes to the group's
 * dead-letter queue, which a second consumer reads.
 *
 * <p>Usage: DelayRetryDlq NAMESRV TOPIC GROUP
 */
public final class DelayRetryDlq {
  private static final int MESSAGES = 4;

  public static void main(String[] args) throws Exception {
    // A consumer of a topic made after it starts takes its queues at the next rebalance: every
    // second here, not every 20 (the dead-letter topic is made by the first dead letter).
    System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    Map<String, Object> transcript = new TreeMap<>();

    DefaultMQProducer producer = Drivers.producer(namesrv, group + "-producer");
    Map<String, Long> sentAt = new ConcurrentHashMap<>();
    for (int seq = 0; seq < MESSAGES; seq++) {
      Message message = new Message(topic, "delay", "key-" + seq, Drivers.utf8("delay-" + seq));
      message.putUserProperty("seq", Integer.toString(seq));
      if (seq % 2 == 0) {
        message.setDelayTimeLevel(1);
      }
      sentAt.put(Integer.toString(seq), System.currentTimeMillis());
      producer.send(message);
    }
    ConcurrentLinkedQueue<MessageExt> delayed = new ConcurrentLinkedQueue<>();
    Map<String, Boolean> waited = new ConcurrentHashMap<>();
    DefaultMQPushConsumer delayConsumer = Drivers.pushConsumer(namesrv, group + "-delay", "d");
    delayConsumer.subscribe(topic, "delay");
    delayConsumer.registerMessageListener(
        (MessageListenerConcurrently)
            (messages, context) -> {
              for (MessageExt message : messages) {
                String seq = message.getUserProperty("seq");
                // Only the delayed ones: a plain message may also arrive after a second,
                // when the consumer is slow to start.
                if (message.getProperties().containsKey("REAL_TOPIC")) {
                  waited.put(seq, System.currentTimeMillis() - sentAt.get(seq) >= 900);
                }
              }
              delayed.addAll(messages);
              return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
    delayConsumer.start();
    Drivers.require(() -> delayed.size() >= MESSAGES, 60, "the delayed messages");
    transcript.put("delayed", Drivers.sortedEntries(delayed));
    transcript.put("waitedASecond", new TreeMap<>(waited));

    for (int seq = 0; seq < MESSAGES; seq++) {
      Message message = new Message(topic, "fail", "key-" + seq, Drivers.utf8("fail-" + seq));
      message.putUserProperty("seq", Integer.toString(seq));
      producer.send(message);
    }
    producer.shutdown();
    Map<String, List<Integer>> tries = new ConcurrentHashMap<>();
    DefaultMQPushConsumer failing = Drivers.pushConsumer(namesrv, group, "f");
    failing.setMaxReconsumeTimes(2);
    failing.subscribe(topic, "fail");
    failing.registerMessageListener(
        (MessageListenerConcurrently)
            (messages, context) -> {
              for (MessageExt message : messages) {
                tries
                    .computeIfAbsent(message.getUserProperty("seq"), seq -> new ArrayList<>())
                    .add(message.getReconsumeTimes());
              }
              context.setDelayLevelWhenNextConsume(1);
              return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            });
    failing.start();

    ConcurrentLinkedQueue<MessageExt> dead = new ConcurrentLinkedQueue<>();
    DefaultMQPushConsumer dlq = Drivers.pushConsumer(namesrv, group + "-dlq", "q");
    // It looks for the dead-letter topic's route every second, not every 30.
    dlq.setPollNameServerInterval(1000);
    dlq.subscribe("%DLQ%" + group, "*");
    dlq.registerMessageListener(SendKinds.collect(dead));
    dlq.start();
    Drivers.require(() -> dead.size() >= MESSAGES, 90, "the dead letters");
    Thread.sleep(500); // a late retry would show
    failing.shutdown();
    dlq.shutdown();
    delayConsumer.shutdown();
    Map<String, List<Integer>> sortedTries = new TreeMap<>();
    tries.forEach((seq, times) -> sortedTries.put(seq, Drivers.sorted(times)));
    transcript.put("tries", sortedTries);
    transcript.put("deadLetters", Drivers.sortedEntries(dead));
    Drivers.print(transcript);
  }

  private DelayRetryDlq() {}
}
