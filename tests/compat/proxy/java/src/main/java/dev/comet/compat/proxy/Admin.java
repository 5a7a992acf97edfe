package dev.comet.compat.proxy;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Creates the scenarios' topics and consumer groups at every master broker through the
 * remoting admin API (what mqadmin {@code updateTopic -a +message.type=...} and
 * {@code updateSubGroup} send), so no scenario depends on auto-creation.
 *
 * <p>The proxy of RocketMQ 5.x checks each send against the topic's {@code message.type}
 * attribute (Java's {@code ProducerProcessor} with {@code enableTopicMessageTypeCheck}, read
 * from the broker with GET_TOPIC_CONFIG), and the SDKs check it against the route's accepted
 * message types: FIFO, DELAY and TRANSACTION topics must carry it.
 */
final class Admin implements AutoCloseable {
  static final int QUEUES = 4;
  private static final long ROUTE_WAIT_MS = 30_000;
  private final DefaultMQAdminExt admin;

  Admin(String namesrv) throws Exception {
    admin = new DefaultMQAdminExt("compat_proxy_admin_" + System.nanoTime(), 10_000);
    admin.setNamesrvAddr(namesrv);
    admin.setInstanceName("compat_proxy_admin_" + System.nanoTime());
    admin.start();
  }

  private List<String> masters() throws Exception {
    ClusterInfo info = admin.examineBrokerClusterInfo();
    List<String> addrs = new ArrayList<>();
    for (BrokerData b : info.getBrokerAddrTable().values()) {
      String master = b.getBrokerAddrs().get(0L);
      if (master != null) {
        addrs.add(master);
      }
    }
    if (addrs.isEmpty()) {
      throw new IllegalStateException("the name server knows no master broker");
    }
    return addrs;
  }

  /**
   * Creates {@code topic} with {@code messageType} (NORMAL, FIFO, DELAY or TRANSACTION) on every
   * master and waits until the name server routes it.
   */
  void createTopic(String topic, String messageType) throws Exception {
    for (String addr : masters()) {
      TopicConfig config = new TopicConfig(topic, QUEUES, QUEUES);
      config.setAttributes(Map.of("+message.type", messageType));
      admin.createAndUpdateTopicConfig(addr, config);
    }
    Expect.waitFor("a route for " + topic, ROUTE_WAIT_MS, () -> routed(topic), () -> "none yet");
  }

  /** True once the name server routes {@code topic} (TOPIC_NOT_EXIST until registered). */
  private boolean routed(String topic) {
    try {
      TopicRouteData route = admin.examineTopicRouteInfo(topic);
      return route != null && !route.getQueueDatas().isEmpty();
    } catch (Exception notYet) {
      return false;
    }
  }

  /** Creates consumer group {@code group} on every master; orderly for FIFO consumption. */
  void createGroup(String group, boolean orderly) throws Exception {
    for (String addr : masters()) {
      SubscriptionGroupConfig config = new SubscriptionGroupConfig();
      config.setGroupName(group);
      config.setConsumeMessageOrderly(orderly);
      admin.createAndUpdateSubscriptionGroupConfig(addr, config);
    }
  }

  /** The message type the broker reports for {@code topic} (GET_TOPIC_CONFIG). */
  String topicMessageType(String topic) throws Exception {
    String addr = masters().get(0);
    TopicConfig config = admin.examineTopicConfig(addr, topic);
    return config.getTopicMessageType().name();
  }

  @Override
  public void close() {
    admin.shutdown();
  }
}
