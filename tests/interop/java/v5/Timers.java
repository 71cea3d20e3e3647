import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Conformance scenario with rocketmq-client 5.5.0's remoting API: timer messages
 * (`setDelayTimeMs`, `setDeliverTimeMs`) beside a plain one; each arrives once, not before its
 * time.
 *
 * <p>Usage: Timers NAMESRV TOPIC GROUP
 */
public final class Timers {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(10_000);
    producer.start();
    Map<String, Long> due = new TreeMap<>();
    List<String> statuses = new ArrayList<>();
    long now = System.currentTimeMillis();
    for (int seq = 0; seq < 3; seq++) {
      Message message =
          new Message(topic, "timer", "key-" + seq, ("timer-" + seq).getBytes(StandardCharsets.UTF_8));
      message.putUserProperty("seq", Integer.toString(seq));
      if (seq == 1) {
        message.setDelayTimeMs(2_000);
        due.put("1", now + 2_000);
      } else if (seq == 2) {
        message.setDeliverTimeMs(now + 3_000);
        due.put("2", now + 3_000);
      } else {
        due.put("0", now);
      }
      statuses.add(producer.send(message).getSendStatus().name());
    }
    producer.shutdown();

    Map<String, Integer> arrivals = new ConcurrentHashMap<>();
    Map<String, Boolean> notEarly = new ConcurrentHashMap<>();
    Map<String, String> tags = new ConcurrentHashMap<>();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
    consumer.setNamesrvAddr(namesrv);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener(
        (MessageListenerConcurrently)
            (messages, context) -> {
              long arrived = System.currentTimeMillis();
              for (MessageExt message : messages) {
                String seq = message.getUserProperty("seq");
                arrivals.merge(seq, 1, Integer::sum);
                // The timer wheel's slots are a second wide: allow it to fire early within one.
                notEarly.put(seq, arrived >= due.get(seq) - 1_000);
                tags.put(seq, message.getTags() + "@" + message.getTopic());
              }
              return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
    consumer.start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (arrivals.size() < 3 && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    Thread.sleep(500);
    consumer.shutdown();
    Map<String, Object> transcript = new TreeMap<>();
    transcript.put("statuses", statuses);
    transcript.put("arrivals", new TreeMap<>(arrivals));
    transcript.put("notEarly", new TreeMap<>(notEarly));
    transcript.put("tags", new TreeMap<>(tags));
    System.out.println(JSON.toJSONString(transcript));
    System.exit(0);
  }

  private Timers() {}
}
