import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * A producer and a push consumer of a secured cluster: TLS when the JVM runs with
 * -Dtls.enable=true, ACL when an access key is given (signed by the client's own
 * AclClientRPCHook). Prints what was sent, what was consumed, and the first error's message.
 *
 * <p>Usage: Secured NAMESRV TOPIC GROUP COUNT [ACCESS_KEY SECRET_KEY]
 */
public final class Secured {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    int count = Integer.parseInt(args[3]);
    RPCHook hook =
        args.length > 5
            ? new AclClientRPCHook(new SessionCredentials(args[4], args[5]))
            : null;
    Map<String, Object> transcript = new TreeMap<>();
    DefaultMQProducer producer = new DefaultMQProducer(group + "-producer", hook);
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(10_000);
    producer.setRetryTimesWhenSendFailed(0);
    producer.start();
    int sent = 0;
    try {
      for (int i = 0; i < count; i++) {
        SendResult result =
            producer.send(
                new Message(topic, "TagA", ("secured-" + i).getBytes(StandardCharsets.UTF_8)));
        if (result.getSendStatus().name().equals("SEND_OK")) {
          sent++;
        }
      }
    } catch (Exception failure) {
      // The client wraps the broker's answer: keep every cause's message.
      StringBuilder causes = new StringBuilder();
      for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
        causes.append(cause.getMessage()).append(" | ");
      }
      transcript.put("sendError", causes.toString());
    } finally {
      producer.shutdown();
    }
    transcript.put("sent", sent);
    ConcurrentSkipListSet<String> consumed = new ConcurrentSkipListSet<>();
    if (sent > 0) {
      DefaultMQPushConsumer consumer =
          new DefaultMQPushConsumer(group, hook, new AllocateMessageQueueAveragely());
      consumer.setNamesrvAddr(namesrv);
      consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
      consumer.subscribe(topic, "*");
      consumer.registerMessageListener(
          (MessageListenerConcurrently)
              (messages, context) -> {
                messages.forEach(m -> consumed.add(new String(m.getBody(), StandardCharsets.UTF_8)));
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
              });
      consumer.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (consumed.size() < sent && System.nanoTime() < deadline) {
        Thread.sleep(100);
      }
      consumer.shutdown();
    }
    transcript.put("consumed", new TreeSet<>(consumed));
    System.out.println(JSON.toJSONString(transcript));
    System.exit(0);
  }
}
