package dev.comet.compat;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Records what one consumer received, in arrival order, with the wall-clock arrival time of
 * each message (for the delay check). Thread-safe: listeners run on the client's threads.
 */
final class Collector {
  private final List<MessageExt> arrivals = new ArrayList<>();
  private final Set<String> distinct = new HashSet<>();
  final Map<String, Long> arrivalMs = new ConcurrentHashMap<>();

  synchronized void add(List<MessageExt> msgs) {
    long now = System.currentTimeMillis();
    for (MessageExt m : msgs) {
      arrivals.add(m);
      String cid = m.getUserProperty("cid");
      distinct.add(cid);
      arrivalMs.putIfAbsent(String.valueOf(cid), now);
    }
  }

  synchronized int distinctCount() {
    return distinct.size();
  }

  synchronized List<MessageExt> arrivals() {
    return new ArrayList<>(arrivals);
  }

  MessageListenerConcurrently concurrently() {
    return (msgs, context) -> {
      add(msgs);
      return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
    };
  }

  MessageListenerOrderly orderly() {
    return (msgs, context) -> {
      add(msgs);
      return ConsumeOrderlyStatus.SUCCESS;
    };
  }
}
