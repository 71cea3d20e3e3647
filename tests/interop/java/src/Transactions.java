import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Conformance scenario: transactional sends whose local transaction commits, rolls back, or
 * answers UNKNOW and is then committed when the broker checks back; a consumer sees the
 * committed ones only, each once.
 *
 * <p>Usage: Transactions NAMESRV TOPIC GROUP
 */
public final class Transactions {
  private static final int MESSAGES = 6;

  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String topic = args[1];
    String group = args[2];
    ConcurrentLinkedQueue<String> checked = new ConcurrentLinkedQueue<>();
    TransactionMQProducer producer = new TransactionMQProducer(group + "-producer");
    producer.setNamesrvAddr(namesrv);
    producer.setSendMsgTimeout(10_000);
    producer.setTransactionListener(
        new TransactionListener() {
          @Override
          public LocalTransactionState executeLocalTransaction(Message message, Object arg) {
            switch (Integer.parseInt(message.getUserProperty("seq")) % 3) {
              case 0:
                return LocalTransactionState.COMMIT_MESSAGE;
              case 1:
                return LocalTransactionState.ROLLBACK_MESSAGE;
              default:
                return LocalTransactionState.UNKNOW;
            }
          }

          @Override
          public LocalTransactionState checkLocalTransaction(MessageExt message) {
            checked.add(message.getUserProperty("seq"));
            return LocalTransactionState.COMMIT_MESSAGE;
          }
        });
    producer.start();
    List<String> states = new ArrayList<>();
    for (int seq = 0; seq < MESSAGES; seq++) {
      Message message = new Message(topic, "tx", "key-" + seq, Drivers.utf8("tx-" + seq));
      message.putUserProperty("seq", Integer.toString(seq));
      TransactionSendResult result = producer.sendMessageInTransaction(message, null);
      states.add(result.getSendStatus() + "/" + result.getLocalTransactionState());
    }

    ConcurrentLinkedQueue<MessageExt> consumed = new ConcurrentLinkedQueue<>();
    DefaultMQPushConsumer consumer = Drivers.pushConsumer(namesrv, group, "c");
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener(SendKinds.collect(consumed));
    consumer.start();
    int committed = 2 * MESSAGES / 3;
    Drivers.require(() -> consumed.size() >= committed, 90, "the committed messages");
    Thread.sleep(1_500); // a rolled-back message or a second check-back would show
    consumer.shutdown();
    producer.shutdown();
    Map<String, Object> transcript = new TreeMap<>();
    transcript.put("states", states);
    transcript.put("checkedBack", Drivers.sorted(new java.util.TreeSet<>(checked)));
    transcript.put("consumed", Drivers.sortedEntries(consumed));
    Drivers.print(transcript);
  }

  private Transactions() {}
}
