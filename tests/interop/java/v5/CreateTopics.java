import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Creates COUNT topics of 8 queues one after another on one broker, as `mqadmin updateTopic`
 * does (rocketmq-tools 5.5.0's `createAndUpdateTopicConfig`), and times each STEP of them. After
 * each step it asks the NameServer for the route of the step's last topic, which a broker that
 * answers only once the NameServers know the topic has by then. With KIND `groups` it creates
 * consumer groups instead, as `mqadmin updateSubGroup` does
 * (`createAndUpdateSubscriptionGroupConfig`), and asks the broker for the step's last group.
 *
 * <p>Prints one JSON object: {"steps": [{"made": N, "ms_each": X, "checked": true}, ...]}.
 *
 * <p>Usage: CreateTopics NAMESRV BROKER_ADDR COUNT STEP PREFIX [topics|groups]
 */
public final class CreateTopics {
  public static void main(String[] args) throws Exception {
    String namesrv = args[0];
    String broker = args[1];
    int count = Integer.parseInt(args[2]);
    int step = Integer.parseInt(args[3]);
    String prefix = args[4];
    boolean groups = args.length > 5 && args[5].equals("groups");

    DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
    admin.setNamesrvAddr(namesrv);
    admin.setInstanceName("create-topics-" + System.nanoTime());
    admin.start();
    List<Map<String, Object>> steps = new ArrayList<>();
    try {
      long began = System.nanoTime();
      for (int i = 1; i <= count; i++) {
        if (groups) {
          SubscriptionGroupConfig config = new SubscriptionGroupConfig();
          config.setGroupName(prefix + i);
          admin.createAndUpdateSubscriptionGroupConfig(broker, config);
        } else {
          admin.createAndUpdateTopicConfig(broker, new TopicConfig(prefix + i, 8, 8, 6));
        }
        if (i % step == 0 || i == count) {
          long now = System.nanoTime();
          int made = i % step == 0 ? step : i % step;
          boolean checked;
          try {
            if (groups) {
              checked = admin.examineSubscriptionGroupConfig(broker, prefix + i) != null;
            } else {
              TopicRouteData route = admin.examineTopicRouteInfo(prefix + i);
              checked = route != null && !route.getQueueDatas().isEmpty();
            }
          } catch (Exception e) {
            checked = false;
          }
          Map<String, Object> row = new LinkedHashMap<>();
          row.put("made", i);
          row.put("ms_each", (now - began) / 1e6 / made);
          row.put("checked", checked);
          steps.add(row);
          System.err.println(JSON.toJSONString(row));
          began = System.nanoTime();
        }
      }
    } finally {
      admin.shutdown();
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("steps", steps);
    System.out.println(JSON.toJSONString(out));
    System.exit(0);
  }
}
