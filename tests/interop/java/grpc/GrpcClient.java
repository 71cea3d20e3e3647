import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Drives the official 5.x Java client (rocketmq-client-java) through one scenario against a
 * proxy, printing JSON lines as python5_client.py does (the same scenarios, line and summary
 * shapes), so one test runs every client.
 *
 * <p>java GrpcClient SCENARIO PROXY TOPIC GROUP [COUNT]
 */
public final class GrpcClient {
  private static final long WAIT_MS = 60_000;
  private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

  public static void main(String[] args) throws Exception {
    String scenario = args[0];
    String proxy = args[1];
    String topic = args[2];
    String group = args[3];
    int count = args.length > 4 ? Integer.parseInt(args[4]) : 3;
    ClientConfiguration config =
        ClientConfiguration.newBuilder()
            .setEndpoints(proxy)
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10))
            .build();
    Map<String, Object> summary = new TreeMap<>();
    switch (scenario) {
      case "produce":
        summary.put("sent", produce(config, topic, count, false, 0));
        break;
      case "fifo":
        summary.put("sent", produce(config, topic, count, true, 0));
        break;
      case "delay":
        long at = System.currentTimeMillis() / 1000 + 2;
        summary.put("sent", produce(config, topic, count, false, at));
        summary.put("at", at);
        break;
      case "receive":
        summary.put("received", receiveAll(config, topic, group, count));
        break;
      case "redeliver":
        summary = redeliver(config, topic, group);
        break;
      case "dead-letter":
        summary.put("attempts", deadLetter(config, topic, group));
        break;
      case "transaction":
        summary.put("checked", transaction(config, topic, group));
        break;
      case "push":
      case "push-fifo":
        summary.put("consumed", push(config, topic, group, count, scenario.equals("push")));
        break;
      default:
        throw new IllegalArgumentException("unknown scenario " + scenario);
    }
    Map<String, Object> line = new TreeMap<>();
    line.put("summary", summary);
    say(line);
    System.exit(0);
  }

  static Message message(String topic, String body, String group, long deliverAtSeconds) {
    MessageBuilder builder =
        PROVIDER
            .newMessageBuilder()
            .setTopic(topic)
            .setBody(body.getBytes(StandardCharsets.UTF_8))
            .setTag("TagA")
            .setKeys("key-" + body)
            .addProperty("origin", "java5");
    if (group != null) {
      builder.setMessageGroup(group);
    }
    if (deliverAtSeconds > 0) {
      builder.setDeliveryTimestamp(deliverAtSeconds * 1000);
    }
    return builder.build();
  }

  static List<Object> produce(
      ClientConfiguration config, String topic, int count, boolean fifo, long deliverAt)
      throws Exception {
    try (Producer producer =
        PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build()) {
      List<Object> ids = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        String group = fifo ? "g" + (i % 3) : null;
        ids.add(producer.send(message(topic, "m" + i, group, deliverAt)).getMessageId().toString());
      }
      return ids;
    }
  }

  static SimpleConsumer simple(ClientConfiguration config, String topic, String group, int awaitS)
      throws Exception {
    return PROVIDER
        .newSimpleConsumerBuilder()
        .setClientConfiguration(config)
        .setConsumerGroup(group)
        .setAwaitDuration(Duration.ofSeconds(awaitS))
        .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
        .build();
  }

  static List<Object> receiveAll(ClientConfiguration config, String topic, String group, int count)
      throws Exception {
    List<Object> got = new ArrayList<>();
    try (SimpleConsumer consumer = simple(config, topic, group, 5)) {
      long deadline = System.currentTimeMillis() + WAIT_MS;
      while (got.size() < count && System.currentTimeMillis() < deadline) {
        for (MessageView view : consumer.receive(16, Duration.ofSeconds(15))) {
          got.add(seen(view, null).get("message_id"));
          consumer.ack(view);
        }
      }
    }
    return got;
  }

  static MessageView receiveOne(SimpleConsumer consumer, long deadline) throws Exception {
    while (System.currentTimeMillis() < deadline) {
      List<MessageView> batch = consumer.receive(1, Duration.ofSeconds(30));
      if (!batch.isEmpty()) {
        return batch.get(0);
      }
    }
    throw new IllegalStateException("nothing to receive");
  }

  static Map<String, Object> redeliver(ClientConfiguration config, String topic, String group)
      throws Exception {
    try (SimpleConsumer consumer = simple(config, topic, group, 5)) {
      long deadline = System.currentTimeMillis() + WAIT_MS;
      MessageView first = receiveOne(consumer, deadline);
      int firstAttempt = first.getDeliveryAttempt();
      seen(first, "first");
      consumer.changeInvisibleDuration(first, Duration.ofSeconds(1));
      long changedAt = System.currentTimeMillis();
      MessageView again = receiveOne(consumer, deadline);
      seen(again, "again");
      consumer.ack(again);
      Object stale = null;
      try {
        consumer.ack(first);
      } catch (Exception e) {
        stale = e.getClass().getSimpleName();
      }
      Map<String, Object> summary = new TreeMap<>();
      summary.put("same_message", first.getMessageId().equals(again.getMessageId()));
      summary.put("attempts", List.of(firstAttempt, again.getDeliveryAttempt()));
      summary.put("back_after_s", (System.currentTimeMillis() - changedAt) / 1000.0);
      summary.put("stale_ack", stale);
      return summary;
    }
  }

  static List<Object> deadLetter(ClientConfiguration config, String topic, String group)
      throws Exception {
    List<Object> attempts = new ArrayList<>();
    try (SimpleConsumer consumer = simple(config, topic, group, 3)) {
      long deadline = System.currentTimeMillis() + WAIT_MS;
      long last = 0;
      while (System.currentTimeMillis() < deadline) {
        List<MessageView> batch = consumer.receive(1, Duration.ofSeconds(10));
        if (batch.isEmpty()) {
          // 3 s without a redelivery, where one takes milliseconds.
          if (!attempts.isEmpty() && System.currentTimeMillis() - last >= 3000) {
            break;
          }
          continue;
        }
        last = System.currentTimeMillis();
        attempts.add(seen(batch.get(0), null).get("attempt"));
        consumer.changeInvisibleDuration(batch.get(0), Duration.ZERO);
      }
    }
    return attempts;
  }

  static List<Object> transaction(ClientConfiguration config, String topic, String group)
      throws Exception {
    List<Object> checked = Collections.synchronizedList(new ArrayList<>());
    try (Producer producer =
        PROVIDER
            .newProducerBuilder()
            .setClientConfiguration(config)
            .setTopics(topic)
            .setTransactionChecker(
                view -> {
                  String body = body(view);
                  checked.add(body);
                  Map<String, Object> line = new TreeMap<>();
                  line.put("checked", body);
                  say(line);
                  return TransactionResolution.COMMIT;
                })
            .build()) {
      for (String body : List.of("commit", "rollback", "orphan")) {
        Transaction tx = producer.beginTransaction();
        producer.send(message(topic, body, null, 0), tx);
        if (body.equals("commit")) {
          tx.commit();
        } else if (body.equals("rollback")) {
          tx.rollback();
        }
      }
      long deadline = System.currentTimeMillis() + WAIT_MS;
      while (checked.isEmpty() && System.currentTimeMillis() < deadline) {
        Thread.sleep(200);
      }
      // The client answers a check on its own once the checker returns: the producer stays up
      // until the orphan's commit can be read (by a group of its own), or closing it could cut
      // the answer off and leave the orphan a half with no producer to ask.
      try (SimpleConsumer probe = simple(config, topic, group + "-probe", 5)) {
        boolean committed = false;
        while (!committed && System.currentTimeMillis() < deadline) {
          for (MessageView view : probe.receive(16, Duration.ofSeconds(15))) {
            committed = committed || body(view).equals("orphan");
          }
        }
      }
      return new ArrayList<>(checked);
    }
  }

  static List<Object> push(
      ClientConfiguration config, String topic, String group, int count, boolean failFirst)
      throws Exception {
    List<Object> consumed = Collections.synchronizedList(new ArrayList<>());
    // Not closed: its close waits for the receives in flight, up to the proxy's longest long
    // polling (20 s on RocketMQ's), and the driver exits after printing what it saw.
    PushConsumer consumer =
        PROVIDER
            .newPushConsumerBuilder()
            .setClientConfiguration(config)
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setMessageListener(
                view -> {
                  Map<String, Object> line = seen(view, null);
                  consumed.add(Arrays.asList(line.get("body"), line.get("attempt"), line.get("group")));
                  if (failFirst && view.getDeliveryAttempt() == 1) {
                    return ConsumeResult.FAILURE;
                  }
                  return ConsumeResult.SUCCESS;
                })
            .build();
    int wanted = count * (failFirst ? 2 : 1);
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while (consumed.size() < wanted && System.currentTimeMillis() < deadline) {
      Thread.sleep(100);
    }
    Thread.sleep(1000); // a delivery too many would show
    return new ArrayList<>(consumed);
  }

  static String body(MessageView view) {
    ByteBuffer buffer = view.getBody().duplicate();
    byte[] bytes = new byte[buffer.remaining()];
    buffer.get(bytes);
    return new String(bytes, StandardCharsets.UTF_8);
  }

  static Map<String, Object> seen(MessageView view, String phase) {
    Map<String, Object> line = new TreeMap<>();
    line.put("message_id", view.getMessageId().toString());
    line.put("body", body(view));
    line.put("tag", view.getTag().orElse(null));
    List<Object> keys = new ArrayList<>(view.getKeys());
    keys.sort(null);
    line.put("keys", keys);
    line.put("properties", new TreeMap<String, Object>(view.getProperties()));
    line.put("attempt", view.getDeliveryAttempt());
    line.put("group", view.getMessageGroup().orElse(null));
    line.put("handle", null);
    line.put("t", System.currentTimeMillis() / 1000.0);
    if (phase != null) {
      line.put("phase", phase);
    }
    say(line);
    return line;
  }

  static synchronized void say(Map<String, Object> line) {
    StringBuilder out = new StringBuilder();
    json(out, line);
    System.out.println(out);
    System.out.flush();
  }

  @SuppressWarnings("unchecked")
  static void json(StringBuilder out, Object value) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String) {
      out.append('"');
      for (char c : ((String) value).toCharArray()) {
        if (c == '"' || c == '\\') {
          out.append('\\').append(c);
        } else if (c < 0x20) {
          out.append(String.format("\\u%04x", (int) c));
        } else {
          out.append(c);
        }
      }
      out.append('"');
    } else if (value instanceof Number || value instanceof Boolean) {
      out.append(value);
    } else if (value instanceof Map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<String, Object> entry : ((Map<String, Object>) value).entrySet()) {
        if (!first) {
          out.append(", ");
        }
        first = false;
        json(out, entry.getKey());
        out.append(": ");
        json(out, entry.getValue());
      }
      out.append('}');
    } else if (value instanceof List) {
      out.append('[');
      boolean first = true;
      for (Object item : (List<Object>) value) {
        if (!first) {
          out.append(", ");
        }
        first = false;
        json(out, item);
      }
      out.append(']');
    } else {
      json(out, value.toString());
    }
  }
}
