// Prints Pulsar's own sticky-key hashes of the keys pinned in src/base/tests/murmur3_test.cc.
// It sits in Pulsar's package to reach the package-private StickyKeyConsumerSelectorUtils.
// Run (from the repository root, after pulsar-standalone.sh has fetched the jars):
//   L=tools/pulsar-reference/lib; mkdir -p /tmp/pin && javac -cp "$L/*" -d /tmp/pin \
//     tools/pulsar-reference/hash-vectors/PinHashes.java && \
//     java -cp "/tmp/pin:$L/*" org.apache.pulsar.broker.service.PinHashes
// Columns: makeHash (Murmur3_32 seed 0 & Integer.MAX_VALUE), makeHash % 65536, and what Pulsar
// 4.x selectors compute: range [0, 65535] (sticky/auto-split: % 65536, 0 -> 1) and range
// [1, 65535] (the consistent-hashing selector: % 65535 + 1).
package org.apache.pulsar.broker.service;

import java.nio.charset.StandardCharsets;
import org.apache.pulsar.client.api.Range;
import org.apache.pulsar.common.util.Murmur3_32Hash;

public class PinHashes {
  public static void main(String[] args) {
    String[] keys = {"", "a", "key-0", "key-1", "key-42", "device-000001", "NONE_KEY",
        "hello world", "0123456789abcdef", "\u00e9t\u00e9", "iot-telemetry", "x"};
    byte[][] bins = {{(byte)0xff}, {(byte)0x80,(byte)0x81,(byte)0x82}, {0x61,0x62,(byte)0xfe},
        {1,2,3,4,5,6,7}, {(byte)0xde,(byte)0xad,(byte)0xbe,(byte)0xef,(byte)0x00,(byte)0x01}};
    java.util.List<byte[]> all = new java.util.ArrayList<>();
    for (String k : keys) all.add(k.getBytes(StandardCharsets.UTF_8));
    for (byte[] x : bins) all.add(x);
    for (byte[] b : all) {
      int h = Murmur3_32Hash.getInstance().makeHash(b);
      int sticky = StickyKeyConsumerSelectorUtils.makeStickyKeyHash(b, Range.of(0, 65535));
      int consistent = StickyKeyConsumerSelectorUtils.makeStickyKeyHash(b, Range.of(1, 65535));
      StringBuilder hex = new StringBuilder();
      for (byte x : b) hex.append(String.format("\\x%02x", x));
      System.out.println("\"" + hex + "\" makeHash=" + h + " mod65536=" + (h % 65536)
          + " selector0_65535=" + sticky + " consistent1_65535=" + consistent);
    }
    // Ring points of ConsistentHashingStickyKeyConsumerSelector: consumerName, '\0', name index,
    // '\0', point index, hashed into [1, 65535].
    for (String name : new String[] {"c1", "consumer-a"}) {
      for (int idx = 0; idx < 2; idx++) {
        for (int i = 0; i < 3; i++) {
          String key = name + "\0" + idx + "\0" + i;
          System.out.println("ring " + name + " " + idx + " " + i + " = "
              + StickyKeyConsumerSelectorUtils.makeStickyKeyHash(key.getBytes(), Range.of(1, 65535)));
        }
      }
    }
  }
}
