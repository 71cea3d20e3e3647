import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * A Java producer sending one message at a time for a while, through whatever master the
 * NameServer names (routes refreshed every second, not every 30 s), while the test kills the
 * master of a DLedger group. Prints every acknowledged send (queue, offset, body, milliseconds
 * since start) and how many sends failed.
 *
 * <p>Usage: DLedgerFailover NAMESRV TOPIC SECONDS
 */
public final class DLedgerFailover {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    long runMs = Long.parseLong(args[2]) * 1000;

    DefaultMQProducer producer = new DefaultMQProducer("dledger-java-producer");
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(3_000);
    producer.setPollNameServerInterval(1_000);
    producer.start();
    List<Map<String, Object>> acked = new ArrayList<>();
    int failed = 0;
    long started = System.currentTimeMillis();
    for (int i = 0; System.currentTimeMillis() - started < runMs; i++) {
      String body = "java-" + i;
      try {
        SendResult result =
            producer.send(new Message(topic, body.getBytes(StandardCharsets.UTF_8)));
        if (result.getSendStatus() != SendStatus.SEND_OK) {
          failed++;
          continue;
        }
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("queueId", result.getMessageQueue().getQueueId());
        row.put("offset", result.getQueueOffset());
        row.put("body", body);
        row.put("ms", System.currentTimeMillis() - started);
        acked.add(row);
      } catch (Exception failure) {
        failed++;
        Thread.sleep(50);
      }
    }
    producer.shutdown();
    Map<String, Object> transcript = new LinkedHashMap<>();
    transcript.put("acked", acked);
    transcript.put("failed", failed);
    System.out.println(JSON.toJSONString(transcript));
    System.exit(0);
  }
}
