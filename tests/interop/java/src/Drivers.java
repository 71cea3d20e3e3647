import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.zip.CRC32;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/** What every conformance driver shares: clients set up alike, bounded waits, and messages
 * reduced to what must not differ between two servers (no ids, hosts or times). */
final class Drivers {
  static {
    // A driver that fails must end: the clients' threads would keep the JVM alive.
    Thread.currentThread()
        .setUncaughtExceptionHandler(
            (thread, failure) -> {
              failure.printStackTrace();
              System.exit(1);
            });
  }

  /** Properties that vary from run to run: ids, offsets, times, and the queue a producer's
   * random start picked. */
  private static final Set<String> VOLATILE_PROPERTIES =
      Set.of(
          "UNIQ_KEY", "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "ORIGIN_MESSAGE_ID",
          "TRAN_MSG_ID", "__transactionId__", "REAL_QID", "WAIT");

  /** Properties only Apache RocketMQ's broker adds or keeps (docs/compatibility.md says why). */
  private static final Set<String> LISTED_PROPERTIES =
      Set.of("MSG_REGION", "TRACE_ON", "CLUSTER", "DELAY", "TRAN_MSG");

  static DefaultMQProducer producer(String namesrv, String group) throws Exception {
    DefaultMQProducer producer = new DefaultMQProducer(group);
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(10_000);
    producer.start();
    return producer;
  }

  static DefaultMQPushConsumer pushConsumer(String namesrv, String group, String instance) {
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
    consumer.setNamesrvAddr(namesrv);
    consumer.setInstanceName(instance);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.setPersistConsumerOffsetInterval(500);
    return consumer;
  }

  static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  /** Waits until `done` holds, at most `seconds`; false when it never did. */
  static boolean await(BooleanSupplier done, int seconds) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (!done.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      Thread.sleep(50);
    }
    return true;
  }

  static void require(BooleanSupplier done, int seconds, String what) throws InterruptedException {
    if (!await(done, seconds)) {
      System.err.println("timed out after " + seconds + " s waiting for " + what);
      System.exit(2);
    }
  }

  /** A consumed message without its ids, hosts and times. */
  static Map<String, Object> entry(MessageExt message) {
    Map<String, Object> entry = new TreeMap<>();
    byte[] body = message.getBody();
    if (body.length > 64) {
      CRC32 crc = new CRC32();
      crc.update(body);
      entry.put("bodyLength", body.length);
      entry.put("bodyCrc", crc.getValue());
    } else {
      entry.put("body", new String(body, StandardCharsets.UTF_8));
    }
    entry.put("topic", message.getTopic());
    entry.put("tags", message.getTags());
    entry.put("keys", message.getKeys());
    entry.put("reconsumeTimes", message.getReconsumeTimes());
    entry.put("sysFlag", message.getSysFlag());
    entry.put("flag", message.getFlag());
    Map<String, String> properties = new TreeMap<>(message.getProperties());
    properties.keySet().removeAll(VOLATILE_PROPERTIES);
    properties.keySet().removeAll(LISTED_PROPERTIES);
    entry.put("properties", properties);
    return entry;
  }

  /** Entries sorted by their "seq" user property (then by body), so arrival order is moot. */
  static List<Map<String, Object>> sortedEntries(Collection<MessageExt> messages) {
    List<Map<String, Object>> entries = new ArrayList<>();
    for (MessageExt message : messages) {
      entries.add(entry(message));
    }
    entries.sort(Comparator.comparing(Drivers::sortKey));
    return entries;
  }

  private static String sortKey(Map<String, Object> entry) {
    @SuppressWarnings("unchecked")
    Map<String, String> properties = (Map<String, String>) entry.get("properties");
    String seq = properties.getOrDefault("seq", "");
    return String.format("%08d|%s", seq.isEmpty() ? 0 : Integer.parseInt(seq), entry);
  }

  static <T extends Comparable<T>> List<T> sorted(Collection<T> items) {
    List<T> list = new ArrayList<>(items);
    Collections.sort(list);
    return list;
  }

  static void print(Map<String, Object> transcript) {
    System.out.println(JSON.toJSONString(transcript));
    System.exit(0);
  }

  private Drivers() {}
}
