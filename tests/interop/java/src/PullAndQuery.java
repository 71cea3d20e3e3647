import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Conformance scenario: two messages in each of four queues, then a lite pull consumer
 * subscribed (poll, commit) and one assigned with a seek; a pull consumer pulling each queue by
 * offset, also past its end and before its start; a query by key and a look-up by message id.
 *
 * <p>Usage: PullAndQuery NAMESRV TOPIC GROUP
 */
public final class PullAndQuery {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    Map<String, Object> transcript = new TreeMap<>();
    DefaultMQProducer producer = Drivers.producer(namesrv, group + "-producer");
    SendResult warm = producer.send(new Message(topic, "warm", Drivers.utf8("creates it")));
    // The NameServer learns a topic the send created from the broker's next registration.
    List<MessageQueue> queues = new ArrayList<>();
    Drivers.require(
        () -> {
          try {
            queues.addAll(producer.fetchPublishMessageQueues(topic));
            return true;
          } catch (Exception notYet) {
            return false;
          }
        },
        30,
        "the route of " + topic);
    java.util.Collections.sort(queues);
    for (MessageQueue queue : queues) {
      // Every queue starts with one warm-up message, wherever the first one went.
      if (queue.getQueueId() != warm.getMessageQueue().getQueueId()) {
        producer.send(new Message(topic, "warm", Drivers.utf8("evens it")), queue);
      }
    }
    String lastId = null;
    for (int seq = 0; seq < 8; seq++) {
      Message message = new Message(topic, "pull", "key-" + seq, Drivers.utf8("pull-" + seq));
      message.putUserProperty("seq", Integer.toString(seq));
      SendResult result = producer.send(message, queues.get(seq % queues.size()));
      lastId = result.getMsgId();
    }

    DefaultLitePullConsumer subscribed = new DefaultLitePullConsumer(group + "-lite");
    subscribed.setNamesrvAddr(namesrv);
    subscribed.setAutoCommit(false);
    subscribed.subscribe(topic, "pull");
    subscribed.start();
    List<MessageExt> polled = new ArrayList<>();
    Drivers.require(
        () -> {
          polled.addAll(subscribed.poll(200));
          return polled.size() >= 8;
        },
        60,
        "8 polled messages");
    subscribed.commitSync();
    Map<String, Long> committed = new TreeMap<>();
    for (MessageQueue queue : queues) {
      committed.put(Integer.toString(queue.getQueueId()), subscribed.committed(queue));
    }
    subscribed.shutdown();
    transcript.put("subscribedPoll", Drivers.sortedEntries(polled));
    transcript.put("committed", committed);

    DefaultLitePullConsumer assigned = new DefaultLitePullConsumer(group + "-assign");
    assigned.setNamesrvAddr(namesrv);
    assigned.setAutoCommit(false);
    assigned.start();
    assigned.assign(queues);
    for (MessageQueue queue : queues) {
      assigned.seek(queue, queue.getQueueId() == 0 ? 1 : 2);
    }
    List<MessageExt> sought = new ArrayList<>();
    Drivers.require(
        () -> {
          sought.addAll(assigned.poll(200));
          return sought.size() >= 2;
        },
        60,
        "the messages after the seek");
    Thread.sleep(300);
    sought.addAll(assigned.poll(200));
    assigned.shutdown();
    transcript.put("afterSeek", placed(sought));

    DefaultMQPullConsumer puller = new DefaultMQPullConsumer(group + "-pull");
    puller.setNamesrvAddr(namesrv);
    puller.start();
    Map<String, Object> pulls = new TreeMap<>();
    for (MessageQueue queue : queues) {
      PullResult all = puller.pull(queue, "pull", 0, 32);
      PullResult end = puller.pull(queue, "*", all.getNextBeginOffset(), 32);
      PullResult beyond = puller.pull(queue, "*", all.getMaxOffset() + 5, 32);
      Map<String, Object> answers = new TreeMap<>();
      answers.put("all", pullResult(all));
      answers.put("atEnd", pullResult(end));
      answers.put("beyondEnd", pullResult(beyond));
      answers.put("maxOffset", puller.maxOffset(queue));
      answers.put("minOffset", puller.minOffset(queue));
      pulls.put(Integer.toString(queue.getQueueId()), answers);
    }
    puller.shutdown();
    transcript.put("pulls", pulls);

    Map<String, Object> queries = new TreeMap<>();
    Drivers.require(
        () -> {
          try {
            return producer.queryMessage(topic, "key-3", 32, 0, Long.MAX_VALUE).getMessageList().size()
                >= 1;
          } catch (Exception notYet) {
            return false;
          }
        },
        30,
        "the index to find key-3");
    queries.put(
        "byKey",
        Drivers.sortedEntries(
            producer.queryMessage(topic, "key-3", 32, 0, Long.MAX_VALUE).getMessageList()));
    queries.put("byId", Drivers.entry(producer.viewMessage(topic, lastId)));
    producer.shutdown();
    transcript.put("queries", queries);
    Drivers.print(transcript);
  }

  private static Map<String, Object> pullResult(PullResult result) {
    Map<String, Object> answer = new TreeMap<>();
    answer.put("status", result.getPullStatus().name());
    answer.put("nextBeginOffset", result.getNextBeginOffset());
    List<MessageExt> found = result.getMsgFoundList();
    answer.put("messages", found == null ? List.of() : placed(found));
    return answer;
  }

  /** queue id, queue offset and seq of each message, in that order. */
  private static List<String> placed(Collection<MessageExt> messages) {
    List<String> placed = new ArrayList<>();
    for (MessageExt message : messages) {
      placed.add(
          message.getQueueId() + "@" + message.getQueueOffset() + "=" + message.getUserProperty("seq"));
    }
    return Drivers.sorted(placed);
  }

  private PullAndQuery() {}
}
