import com.alibaba.fastjson.JSON;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * The real mqadmin (rocketmq-tools 5.5.0), many command lines in one JVM: a JVM start costs
 * seconds, most commands milliseconds. First, so that the connection and status commands have
 * someone to show, it starts a producer and a clustering push consumer (rocketmq-client 5.5.0's
 * remoting API), sends COUNT messages with keys and tags and waits until they are consumed; the
 * clients stay online while the commands run.
 *
 * <p>Each line of COMMANDS_FILE is one command line, its words separated by tabs; {msgId} and
 * {offsetMsgId} stand for the ids of the last message sent. Prints one JSON
 * list: for each command line in order, what it printed to stdout and to stderr.
 *
 * <p>Usage: AdminBatch NAMESRV TOPIC GROUP COUNT COMMANDS_FILE
 */
public final class AdminBatch {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    int count = Integer.parseInt(args[3]);
    List<String> lines = Files.readAllLines(Paths.get(args[4]), StandardCharsets.UTF_8);

    DefaultMQProducer producer = new DefaultMQProducer(group + "Producer");
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(10_000);
    producer.start();
    SendResult last = null;
    for (int i = 0; i < count; i++) {
      Message message =
          new Message(topic, "TagA", "key-" + i, ("body-" + i).getBytes(StandardCharsets.UTF_8));
      last = producer.send(message);
    }
    AtomicInteger consumed = new AtomicInteger();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
    consumer.setNamesrvAddr(namesrv);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener(
        (MessageListenerConcurrently)
            (messages, context) -> {
              consumed.addAndGet(messages.size());
              return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
    consumer.start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (consumed.get() < count && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    if (consumed.get() < count) {
      System.err.printf("only %d of %d messages consumed in 60 s%n", consumed.get(), count);
      System.exit(1);
    }
    // Its offsets reach the broker now, not at the client's first persist 10 s after start.
    consumer.getDefaultMQPushConsumerImpl().persistConsumerOffset();
    Thread.sleep(500);

    PrintStream out = System.out;
    PrintStream err = System.err;
    List<Map<String, String>> results = new ArrayList<>();
    for (String line : lines) {
      if (line.isEmpty()) {
        continue;
      }
      long started = System.nanoTime();
      // The ids of the last message sent, for the commands that look one up.
      line = line.replace("{msgId}", last.getMsgId()).replace("{offsetMsgId}", last.getOffsetMsgId());
      ByteArrayOutputStream stdout = new ByteArrayOutputStream();
      ByteArrayOutputStream stderr = new ByteArrayOutputStream();
      System.setOut(new PrintStream(stdout, true, "UTF-8"));
      System.setErr(new PrintStream(stderr, true, "UTF-8"));
      try {
        MQAdminStartup.main(line.split("\t"));
      } catch (Throwable failure) {
        failure.printStackTrace();
      } finally {
        System.setOut(out);
        System.setErr(err);
      }
      long tookMs = (System.nanoTime() - started) / 1_000_000;
      err.printf("%6d ms  %s%n", tookMs, line.replace('\t', ' '));
      Map<String, String> result = new LinkedHashMap<>();
      result.put("command", line.replace('\t', ' '));
      result.put("stdout", stdout.toString("UTF-8"));
      result.put("stderr", stderr.toString("UTF-8"));
      results.add(result);
    }
    out.println(JSON.toJSONString(results));
    System.exit(0);
  }

  private AdminBatch() {}
}
