import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Conformance scenario: sync sends with tags, keys and a user property, then a clustering push
 * consumer subscribed to two of the three tags. Prints one normalised JSON transcript: what each
 * send answered (status and the queues used), and what was consumed, sorted, without ids, hosts
 * or times.
 *
 * <p>Usage: SendThenConsume NAMESRV TOPIC GROUP COUNT
 */
public final class SendThenConsume {
  private static final String[] TAGS = {"TagA", "TagB", "TagC"};

  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    int count = Integer.parseInt(args[3]);

    DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(10_000);
    producer.start();
    Map<String, Integer> statuses = new TreeMap<>();
    TreeSet<Integer> queues = new TreeSet<>();
    int expected = 0;
    for (int i = 0; i < count; i++) {
      String tag = TAGS[i % TAGS.length];
      Message message =
          new Message(topic, tag, "key-" + i, ("body-" + i).getBytes(StandardCharsets.UTF_8));
      message.putUserProperty("seq", Integer.toString(i));
      SendResult result = producer.send(message);
      statuses.merge(result.getSendStatus().name(), 1, Integer::sum);
      queues.add(result.getMessageQueue().getQueueId());
      if (!tag.equals("TagC")) {
        expected++;
      }
    }
    producer.shutdown();

    ConcurrentLinkedQueue<MessageExt> received = new ConcurrentLinkedQueue<>();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
    consumer.setNamesrvAddr(namesrv);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "TagA || TagB");
    consumer.registerMessageListener(
        (MessageListenerConcurrently)
            (messages, context) -> {
              received.addAll(messages);
              return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
    consumer.start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (received.size() < expected && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    Thread.sleep(500); // a late duplicate would show in the transcript
    consumer.shutdown();

    List<Map<String, Object>> consumed = new ArrayList<>();
    for (MessageExt message : received) {
      Map<String, Object> entry = new TreeMap<>();
      entry.put("body", new String(message.getBody(), StandardCharsets.UTF_8));
      entry.put("tags", message.getTags());
      entry.put("keys", message.getKeys());
      entry.put("seq", message.getUserProperty("seq"));
      entry.put("reconsumeTimes", message.getReconsumeTimes());
      entry.put("topic", message.getTopic());
      consumed.add(entry);
    }
    consumed.sort(Comparator.comparing(entry -> Integer.parseInt((String) entry.get("seq"))));
    Map<String, Object> transcript = new TreeMap<>();
    transcript.put("sendStatuses", statuses);
    transcript.put("queuesUsed", queues.size());
    transcript.put("consumed", consumed);
    System.out.println(JSON.toJSONString(transcript));
    System.exit(0);
  }

  private SendThenConsume() {}
}
