import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Conformance scenario: sends ordered by a selector (order id modulo the queue count), one batch
 * send to a second topic, then an orderly push consumer on the first topic. Prints one
 * normalised JSON transcript: the queue each ordered send went to, the batch's status and
 * queue count, and, per queue, the order the orderly consumer saw.
 *
 * <p>Usage: OrderedAndBatch NAMESRV TOPIC GROUP COUNT
 */
public final class OrderedAndBatch {
  private static final int ORDERS = 4;

  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    int count = Integer.parseInt(args[3]);

    DefaultMQProducer producer = new DefaultMQProducer(group + "-producer");
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(10_000);
    producer.start();
    MessageQueueSelector byOrder =
        (List<MessageQueue> queues, Message message, Object orderId) ->
            queues.get((Integer) orderId % queues.size());
    Map<String, Integer> sentTo = new TreeMap<>();
    for (int i = 0; i < count; i++) {
      int orderId = i % ORDERS;
      Message message =
          new Message(
              topic, "order-" + orderId, "seq-" + i, ("step-" + i).getBytes(StandardCharsets.UTF_8));
      message.putUserProperty("seq", Integer.toString(i));
      SendResult result = producer.send(message, byOrder, orderId);
      sentTo.put(String.format("%03d", i), result.getMessageQueue().getQueueId());
    }
    List<Message> batch = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      batch.add(new Message(topic + "Batch", "batch", ("b-" + i).getBytes(StandardCharsets.UTF_8)));
    }
    SendResult batchResult = producer.send(batch);
    producer.shutdown();

    Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
    AtomicInteger received = new AtomicInteger();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
    consumer.setNamesrvAddr(namesrv);
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener(
        (MessageListenerOrderly)
            (messages, context) -> {
              for (MessageExt message : messages) {
                seen.computeIfAbsent(
                        message.getQueueId(), id -> Collections.synchronizedList(new ArrayList<>()))
                    .add(Integer.parseInt(message.getUserProperty("seq")));
                received.incrementAndGet();
              }
              return ConsumeOrderlyStatus.SUCCESS;
            });
    consumer.start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (received.get() < count && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    Thread.sleep(500); // a late duplicate would show in the transcript
    consumer.shutdown();

    Map<String, Object> transcript = new TreeMap<>();
    transcript.put("orderedSentTo", sentTo);
    Map<String, List<Integer>> perQueue = new TreeMap<>(); // fastjson leaves int keys unquoted
    seen.forEach((queueId, seqs) -> perQueue.put(Integer.toString(queueId), seqs));
    transcript.put("orderlyConsumedPerQueue", perQueue);
    transcript.put("batchStatus", batchResult.getSendStatus().name());
    transcript.put("batchMessageIds", batchResult.getMsgId().split(",").length);
    System.out.println(JSON.toJSONString(transcript));
    System.exit(0);
  }

  private OrderedAndBatch() {}
}
