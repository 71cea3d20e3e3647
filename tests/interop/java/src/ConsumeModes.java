import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * Conformance scenario: where a new consumer group starts (from the last offset, from a
 * timestamp), broadcasting to two members of one group, and how a clustering group's queues are
 * shared as a member joins and leaves.
 *
 * <p>Usage: ConsumeModes NAMESRV TOPIC GROUP
 */
public final class ConsumeModes {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    Map<String, Object> transcript = new TreeMap<>();
    DefaultMQProducer producer = Drivers.producer(namesrv, group + "-producer");
    send(producer, topic, "early", 0, 4);
    Thread.sleep(1_100); // a consume timestamp has whole seconds
    String between = new SimpleDateFormat("yyyyMMddHHmmss").format(new Date());
    Thread.sleep(1_100);
    send(producer, topic, "late", 4, 4);

    // A new group "from the last offset" on a topic whose messages are all still in memory.
    transcript.put("fromLast", startAt(namesrv, topic, group + "-last", producer, c -> {
      c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
    }));
    transcript.put("fromTimestamp", startAt(namesrv, topic, group + "-time", producer, c -> {
      c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
      c.setConsumeTimestamp(between);
    }));

    List<ConcurrentLinkedQueue<MessageExt>> received = new ArrayList<>();
    List<DefaultMQPushConsumer> members = new ArrayList<>();
    for (String name : new String[] {"b1", "b2"}) {
      ConcurrentLinkedQueue<MessageExt> into = new ConcurrentLinkedQueue<>();
      DefaultMQPushConsumer member = Drivers.pushConsumer(namesrv, group + "-broadcast", name);
      member.setMessageModel(MessageModel.BROADCASTING);
      member.subscribe(topic, "early || late");
      member.registerMessageListener(SendKinds.collect(into));
      member.start();
      received.add(into);
      members.add(member);
    }
    Drivers.require(
        () -> received.stream().allMatch(into -> into.size() >= 8), 60, "every broadcast");
    Thread.sleep(500);
    List<List<String>> broadcast = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      members.get(i).shutdown();
      broadcast.add(seqs(received.get(i)));
    }
    transcript.put("broadcast", broadcast);

    // Rebalancing: A alone, then A and B, then A alone again.
    List<Map<String, List<Integer>>> shares = new ArrayList<>();
    DefaultMQPushConsumer a = member(namesrv, topic, group + "-rebalance", "A");
    a.start();
    shares.add(awaitShares(topic, Map.of("A", a), 4));
    DefaultMQPushConsumer b = member(namesrv, topic, group + "-rebalance", "B");
    b.start();
    shares.add(awaitShares(topic, Map.of("A", a, "B", b), 2));
    b.shutdown();
    shares.add(awaitShares(topic, Map.of("A", a), 4));
    a.shutdown();
    producer.shutdown();
    transcript.put("rebalance", shares);
    Drivers.print(transcript);
  }

  private static void send(DefaultMQProducer producer, String topic, String tag, int from, int n)
      throws Exception {
    for (int seq = from; seq < from + n; seq++) {
      Message message = new Message(topic, tag, "key-" + seq, Drivers.utf8(tag + "-" + seq));
      message.putUserProperty("seq", Integer.toString(seq));
      producer.send(message);
    }
  }

  /** The seqs a new group receives before a marker sent after it started. */
  private static List<String> startAt(
      String namesrv,
      String topic,
      String group,
      DefaultMQProducer producer,
      java.util.function.Consumer<DefaultMQPushConsumer> setUp)
      throws Exception {
    ConcurrentLinkedQueue<MessageExt> into = new ConcurrentLinkedQueue<>();
    DefaultMQPushConsumer consumer = Drivers.pushConsumer(namesrv, group, group);
    setUp.accept(consumer);
    consumer.subscribe(topic, "early || late || " + group);
    consumer.registerMessageListener(SendKinds.collect(into));
    consumer.start();
    // Once every queue is pulled from, a marker in each queue shows where the group started.
    Drivers.require(() -> processQueues(consumer, topic).size() == 4, 60, group + "'s queues");
    for (MessageQueue queue : producer.fetchPublishMessageQueues(topic)) {
      producer.send(new Message(topic, group, Drivers.utf8("marker")), queue);
    }
    Drivers.require(
        () -> into.stream().filter(m -> group.equals(m.getTags())).count() >= 4, 60, "markers");
    Thread.sleep(300);
    consumer.shutdown();
    return seqs(into);
  }

  private static List<String> seqs(ConcurrentLinkedQueue<MessageExt> messages) {
    List<String> seqs = new ArrayList<>();
    for (MessageExt message : messages) {
      String seq = message.getUserProperty("seq");
      seqs.add(seq == null ? "marker" : seq);
    }
    return Drivers.sorted(seqs);
  }

  private static DefaultMQPushConsumer member(
      String namesrv, String topic, String group, String name) throws Exception {
    DefaultMQPushConsumer member = Drivers.pushConsumer(namesrv, group, name);
    member.subscribe(topic, "*");
    member.registerMessageListener(SendKinds.collect(new ConcurrentLinkedQueue<>()));
    return member;
  }

  private static Set<MessageQueue> processQueues(DefaultMQPushConsumer consumer, String topic) {
    Set<MessageQueue> queues = new java.util.TreeSet<>();
    for (MessageQueue queue :
        consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
      if (queue.getTopic().equals(topic)) {
        queues.add(queue);
      }
    }
    return queues;
  }

  /** Each member's queue ids once every member holds `each` queues. */
  private static Map<String, List<Integer>> awaitShares(
      String topic, Map<String, DefaultMQPushConsumer> members, int each) throws Exception {
    Drivers.require(
        () -> members.values().stream().allMatch(m -> processQueues(m, topic).size() == each),
        60,
        members.size() + " members with " + each + " queues each");
    Map<String, List<Integer>> shares = new TreeMap<>();
    members.forEach(
        (name, member) -> {
          List<Integer> ids = new ArrayList<>();
          processQueues(member, topic).forEach(queue -> ids.add(queue.getQueueId()));
          shares.put(name, ids);
        });
    return shares;
  }

  private ConsumeModes() {}
}
