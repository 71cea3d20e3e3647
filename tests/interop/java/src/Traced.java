import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Conformance scenario: a producer and a push consumer with message trace on (`enableMsgTrace`),
 * which send their trace records to RMQ_SYS_TRACE_TOPIC beside the messages themselves.
 *
 * <p>Usage: Traced NAMESRV TOPIC GROUP [MSG_IDS_FILE]
 *
 * <p>With MSG_IDS_FILE, the ids of the messages sent (UNIQ_KEY, one a line, in send order) are
 * written there rather than into the transcript, which stays comparable between two servers.
 */
public final class Traced {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    DefaultMQProducer producer = new DefaultMQProducer(group + "-producer", true);
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(10_000);
    producer.start();
    Map<String, Object> transcript = new TreeMap<>();
    List<String> sentIds = new ArrayList<>();
    for (int seq = 0; seq < 3; seq++) {
      Message message = new Message(topic, "traced", "key-" + seq, Drivers.utf8("traced-" + seq));
      message.putUserProperty("seq", Integer.toString(seq));
      SendResult sent = producer.send(message);
      sentIds.add(sent.getMsgId());
      transcript.put("send-" + seq, sent.getSendStatus().name());
    }
    ConcurrentLinkedQueue<MessageExt> consumed = new ConcurrentLinkedQueue<>();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, true);
    consumer.setNamesrvAddr(namesrv);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener(SendKinds.collect(consumed));
    consumer.start();
    Drivers.require(() -> consumed.size() >= 3, 60, "3 traced messages");
    Thread.sleep(500);
    consumer.shutdown();
    producer.shutdown();
    transcript.put("consumed", Drivers.sortedEntries(consumed));
    if (args.length > 3) {
      Files.write(Paths.get(args[3]), sentIds, StandardCharsets.UTF_8);
    }
    Drivers.print(transcript);
  }

  private Traced() {}
}
