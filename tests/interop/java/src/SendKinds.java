import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Conformance scenario: every way to send one message (sync, async, oneway, a body large enough
 * for the client to compress, user properties and a flag), then a push consumer of everything
 * and one with a SQL92 selector over a user property.
 *
 * <p>Usage: SendKinds NAMESRV TOPIC GROUP
 */
public final class SendKinds {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    DefaultMQProducer producer = Drivers.producer(namesrv, group + "-producer");
    Map<String, Object> transcript = new TreeMap<>();
    int seq = 0;
    List<String> syncStatuses = new ArrayList<>();
    for (int i = 0; i < 3; i++, seq++) {
      syncStatuses.add(producer.send(message(topic, "sync", seq)).getSendStatus().name());
    }
    transcript.put("sync", syncStatuses);

    CountDownLatch asyncDone = new CountDownLatch(3);
    ConcurrentLinkedQueue<String> asyncStatuses = new ConcurrentLinkedQueue<>();
    for (int i = 0; i < 3; i++, seq++) {
      producer.send(
          message(topic, "async", seq),
          new SendCallback() {
            @Override
            public void onSuccess(SendResult result) {
              asyncStatuses.add(result.getSendStatus().name());
              asyncDone.countDown();
            }

            @Override
            public void onException(Throwable failure) {
              asyncStatuses.add("failed: " + failure.getClass().getSimpleName());
              asyncDone.countDown();
            }
          });
    }
    if (!asyncDone.await(30, TimeUnit.SECONDS)) {
      System.err.println("async sends unanswered after 30 s");
      System.exit(2);
    }
    transcript.put("async", Drivers.sorted(asyncStatuses));

    for (int i = 0; i < 3; i++, seq++) {
      producer.sendOneway(message(topic, "oneway", seq));
    }

    byte[] large = new byte[64 * 1024];
    Arrays.fill(large, (byte) 'x');
    Message compressed = new Message(topic, "large", "key-large", large);
    compressed.putUserProperty("seq", Integer.toString(seq++));
    transcript.put("large", producer.send(compressed).getSendStatus().name());

    Message flagged = message(topic, "flagged", seq++);
    flagged.setFlag(7);
    flagged.putUserProperty("colour", "blue");
    transcript.put("flagged", producer.send(flagged).getSendStatus().name());
    producer.shutdown();
    int total = seq;

    ConcurrentLinkedQueue<MessageExt> all = new ConcurrentLinkedQueue<>();
    DefaultMQPushConsumer everything = Drivers.pushConsumer(namesrv, group, "all");
    everything.subscribe(topic, "*");
    everything.registerMessageListener(collect(all));
    everything.start();

    ConcurrentLinkedQueue<MessageExt> selected = new ConcurrentLinkedQueue<>();
    DefaultMQPushConsumer sql = Drivers.pushConsumer(namesrv, group + "-sql", "sql");
    sql.subscribe(topic, MessageSelector.bySql("n >= 2 AND n < 5 OR colour = 'blue'"));
    sql.registerMessageListener(collect(selected));
    sql.start();

    Drivers.require(() -> all.size() >= total, 60, total + " messages");
    Drivers.require(() -> selected.size() >= 4, 60, "4 messages by the SQL92 selector");
    Thread.sleep(500); // a late duplicate would show
    everything.shutdown();
    sql.shutdown();
    transcript.put("consumed", Drivers.sortedEntries(all));
    transcript.put("selected", Drivers.sortedEntries(selected));
    Drivers.print(transcript);
  }

  static MessageListenerConcurrently collect(ConcurrentLinkedQueue<MessageExt> into) {
    return (messages, context) -> {
      into.addAll(messages);
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    };
  }

  private static Message message(String topic, String kind, int seq) {
    Message message = new Message(topic, kind, "key-" + seq, Drivers.utf8(kind + "-" + seq));
    message.putUserProperty("seq", Integer.toString(seq));
    message.putUserProperty("n", Integer.toString(seq));
    return message;
  }

  private SendKinds() {}
}
