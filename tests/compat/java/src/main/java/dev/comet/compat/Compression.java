package dev.comet.compat;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Bodies compressed by the 5.x producer with LZ4 and with ZSTD ({@code setCompressType}, 5.x
 * clients only: this file is left out of the 4.9.x build, see pom.xml). A Java push consumer
 * gets them intact, and its sysFlag shows the algorithm the stored record names; comet-admin,
 * which decodes through comet-client, reads the same stored records by offset id and prints
 * the very bodies that were sent. The binary is {@code -Dcomet.admin}.
 */
final class Compression {
  private Compression() {}

  private static final long ARRIVAL_TIMEOUT_MS = 60_000;
  /** Messages per scenario; every body is above the producer's 4 KiB compression threshold. */
  private static final int MESSAGES = 12;
  private static final int BODY_BYTES_MIN = 6 * 1024;
  /** RocketMQ's sysFlag bits naming the compression type (MessageSysFlag). */
  private static final int COMPRESSION_TYPE_BITS = 0x7 << 8;
  private static final Pattern BODY = Pattern.compile("\"body\"\\s*:\\s*\"([^\"\\\\]*)\"");
  private static final Pattern BODY_BYTES = Pattern.compile("\"bodyBytes\"\\s*:\\s*(\\d+)");
  private static final Pattern SYS_FLAG = Pattern.compile("\"sysFlag\"\\s*:\\s*(\\d+)");

  /** Adds this file's scenarios; {@link Scenarios#all} calls it on a 5.x client. */
  static void register(Map<String, Main.Scenario> s) {
    s.put("producer_compress_lz4", c -> compressed(c, CompressionType.LZ4));
    s.put("producer_compress_zstd", c -> compressed(c, CompressionType.ZSTD));
  }

  private static String compressed(Ctx ctx, CompressionType type) throws Exception {
    String topic = ctx.createTopic(ctx.name("t"));
    DefaultMQProducer p = ctx.producer();
    p.setCompressType(type);
    Check.that(p.getCompressMsgBodyOverHowmuch() <= BODY_BYTES_MIN,
        "compression threshold " + p.getCompressMsgBodyOverHowmuch() + " above the bodies");
    List<Check.Sent> sent = new ArrayList<>();
    List<String> offsetIds = new ArrayList<>();
    for (int i = 0; i < MESSAGES; i++) {
      Check.Sent s = Check.make(ctx.runId(), topic, i, new String[] {"TagA", "TagB"},
          BODY_BYTES_MIN + i * 1000, 0, i);
      SendResult r = p.send(s.toMessage());
      Check.that(r != null && r.getSendStatus() == SendStatus.SEND_OK,
          "send of " + s.cid() + " returned " + r);
      sent.add(s);
      offsetIds.add(r.getOffsetMsgId());
    }
    Collector got = new Collector();
    DefaultMQPushConsumer c = ctx.pushConsumer(ctx.name("cg"));
    c.subscribe(topic, "*");
    c.registerMessageListener(got.concurrently());
    c.start();
    Check.waitFor(sent.size() + " messages", ARRIVAL_TIMEOUT_MS,
        () -> got.distinctCount() >= sent.size());
    String verdict = Check.verify(sent, got.arrivals(), false);
    for (MessageExt m : got.arrivals()) {
      int stored = (m.getSysFlag() & COMPRESSION_TYPE_BITS) >> 8;
      Check.that(stored == type.getValue(), m.getUserProperty("cid") + ": stored compression "
          + "type " + stored + ", not " + type + " (" + type.getValue() + ")");
    }
    for (int i = 0; i < MESSAGES; i++) {
      readByCometAdmin(ctx, offsetIds.get(i), sent.get(i), type);
    }
    return verdict + " (" + type + "), " + MESSAGES + " read back by comet-admin";
  }

  /**
   * comet-admin queryMsgById of one stored record: its body, decoded by comet-client, is
   * byte for byte the one sent (bodies are ASCII text, printed unescaped), and its sysFlag
   * names the algorithm.
   */
  private static void readByCometAdmin(Ctx ctx, String offsetId, Check.Sent sent,
                                       CompressionType type) throws Exception {
    String bin = System.getProperty("comet.admin", "");
    Check.that(new File(bin).canExecute(), "comet-admin not found at '" + bin
        + "' (cargo build --release -p comet-tools)");
    Process process = new ProcessBuilder(bin, "queryMsgById", "-n", ctx.shared.namesrv,
        "-i", offsetId, "--json").redirectErrorStream(true).start();
    String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    Check.that(process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0,
        "comet-admin queryMsgById " + offsetId + " failed: " + AdminSuite.firstLines(out));
    String id = sent.cid() + " (" + offsetId + "): ";
    Matcher bytes = BODY_BYTES.matcher(out);
    Check.that(bytes.find(), id + "no bodyBytes in comet-admin's answer");
    Check.that(Integer.parseInt(bytes.group(1)) == sent.body().length,
        id + "comet-admin read " + bytes.group(1) + " body bytes, sent " + sent.body().length);
    Matcher body = BODY.matcher(out);
    Check.that(body.find(), id + "no plain-text body in comet-admin's answer");
    Check.that(body.group(1).equals(new String(sent.body(), StandardCharsets.UTF_8)),
        id + "the body comet-admin read differs from the one sent");
    Matcher sysFlag = SYS_FLAG.matcher(out);
    Check.that(sysFlag.find(), id + "no sysFlag in comet-admin's answer");
    int stored = (Integer.parseInt(sysFlag.group(1)) & COMPRESSION_TYPE_BITS) >> 8;
    Check.that(stored == type.getValue(),
        id + "comet-admin saw compression type " + stored + ", not " + type);
  }
}
