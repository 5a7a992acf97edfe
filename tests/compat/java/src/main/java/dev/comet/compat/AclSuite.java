package dev.comet.compat;

import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Runs the Java client, signing with RocketMQ's own {@link AclClientRPCHook}, against a broker
 * started with {@code aclEnable=true} and the accounts of {@code tests/compat/java/acl/plain_acl.yml}
 * (account compatAcl01: every topic PUB|SUB but AclDeniedTopic, which is DENY).
 *
 * <p>Usage: {@code AclSuite --namesrv HOST:PORT}. Prints {@code PASS}/{@code FAIL} per
 * scenario and {@code N passed, N failed}; exits 1 when any failed. Each client gets its own
 * instance name, so each keeps its own RPC hook (clients of one instance share the first's).
 */
public final class AclSuite {
  private static final String ACCESS_KEY = "compatAcl01";
  private static final String SECRET_KEY = "compat-secret-1";
  private static final int MESSAGES = 10;

  private final String namesrv;
  private final String runId = UUID.randomUUID().toString().substring(0, 8);
  private int serial;
  private final Steps steps = new Steps();

  private AclSuite(String namesrv) {
    this.namesrv = namesrv;
  }

  public static void main(String[] args) {
    if (args.length != 2 || !args[0].equals("--namesrv")) {
      System.err.println("usage: AclSuite --namesrv HOST:PORT");
      System.exit(2);
    }
    AclSuite suite = new AclSuite(args[1]);
    suite.step("acl_signed_send_consume", suite::signedSendConsume);
    suite.step("acl_wrong_secret_refused", suite::wrongSecret);
    suite.step("acl_denied_topic_refused", suite::deniedTopic);
    suite.step("acl_unsigned_refused", suite::unsigned);
    System.exit(suite.steps.summarize() == 0 ? 0 : 1);
  }

  private void step(String name, Steps.Step body) {
    steps.run(name, body);
  }

  private String name(String prefix) {
    return prefix + "_" + runId + "_" + (++serial);
  }

  private static RPCHook hook(String secretKey) {
    return new AclClientRPCHook(new SessionCredentials(ACCESS_KEY, secretKey));
  }

  private DefaultMQProducer producer(RPCHook hook) throws Exception {
    DefaultMQProducer producer = hook == null
        ? new DefaultMQProducer(name("acl_pg"))
        : new DefaultMQProducer(name("acl_pg"), hook);
    producer.setNamesrvAddr(namesrv);
    producer.setInstanceName(name("acl_producer"));
    producer.setSendMsgTimeout(5_000);
    producer.start();
    return producer;
  }

  /** The right account sends, then a push consumer of the same account consumes them all. */
  private String signedSendConsume() throws Exception {
    String topic = name("AclTopic");
    DefaultMQProducer producer = producer(hook(SECRET_KEY));
    try {
      for (int i = 0; i < MESSAGES; i++) {
        Message message = new Message(topic, ("acl-" + i).getBytes(StandardCharsets.UTF_8));
        SendResult result = producer.send(message);
        Check.that(result.getSendStatus() == SendStatus.SEND_OK, "send status " + result);
      }
    } finally {
      producer.shutdown();
    }
    Set<String> seen = ConcurrentHashMap.newKeySet();
    DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(
        name("acl_cg"), hook(SECRET_KEY), new AllocateMessageQueueAveragely());
    consumer.setNamesrvAddr(namesrv);
    consumer.setInstanceName(name("acl_consumer"));
    consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
    consumer.subscribe(topic, "*");
    consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
      for (MessageExt message : messages) {
        seen.add(new String(message.getBody(), StandardCharsets.UTF_8));
      }
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    });
    consumer.start();
    try {
      Check.waitFor(MESSAGES + " signed messages consumed", 60_000, () -> seen.size() >= MESSAGES);
    } finally {
      consumer.shutdown();
    }
    return MESSAGES + " sent and consumed";
  }

  /** A send the broker refuses; returns the broker exception the client reports. */
  private MQBrokerException refusedSend(RPCHook hook, String topic) throws Exception {
    DefaultMQProducer producer = producer(hook);
    try {
      producer.setRetryTimesWhenSendFailed(0);
      producer.send(new Message(topic, "refused".getBytes(StandardCharsets.UTF_8)));
    } catch (Exception e) {
      for (Throwable cause = e; cause != null; cause = cause.getCause()) {
        if (cause instanceof MQBrokerException) {
          return (MQBrokerException) cause;
        }
      }
      throw new Check.Failure("the client reported no broker refusal: " + e);
    } finally {
      producer.shutdown();
    }
    throw new Check.Failure("the broker accepted a send it should refuse");
  }

  /** Asserts the Java broker's answer to an ACL refusal: SYSTEM_ERROR (1), AclException. */
  private static String expectAclRefusal(MQBrokerException e, String message) {
    String text = String.valueOf(e.getErrorMessage());
    Check.that(e.getResponseCode() == 1, "response code " + e.getResponseCode() + ": " + text);
    Check.that(text.contains("org.apache.rocketmq.acl.common.AclException: " + message),
        "remark lacks '" + message + "': " + text);
    return "code 1: " + text;
  }

  private String wrongSecret() throws Exception {
    MQBrokerException e = refusedSend(hook("not-the-secret"), name("AclTopic"));
    return expectAclRefusal(e, "Check signature failed for accessKey=" + ACCESS_KEY);
  }

  private String deniedTopic() throws Exception {
    MQBrokerException e = refusedSend(hook(SECRET_KEY), "AclDeniedTopic");
    return expectAclRefusal(e, "No permission for topic:AclDeniedTopic");
  }

  private String unsigned() throws Exception {
    MQBrokerException e = refusedSend(null, name("AclTopic"));
    return expectAclRefusal(e, "No accessKey is configured");
  }
}
