// Writes a ledger with BookKeeper's own Java client and leaves it closed (the shell's simpletest
// deletes its ledger). For interop tests: Magnetar's client must read it back byte for byte.
//
//   java -cp <bk.classpath> WriteLedger.java URI ENSEMBLE WRITE_QUORUM ACK_QUORUM NUM_ENTRIES [V2]
//
// Entry i is the text "entry-<i>-" followed by (i * 37 % 200) bytes 'a' + (k % 26). Digest CRC32C,
// empty password (Pulsar's defaults). Prints "ledger <id> lastEntryId <n>" on stdout.
import java.nio.charset.StandardCharsets;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.api.DigestType;
import org.apache.bookkeeper.client.api.WriteHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

public class WriteLedger {
  static byte[] entry(long i) {
    StringBuilder sb = new StringBuilder("entry-" + i + "-");
    for (int k = 0; k < i * 37 % 200; k++) {
      sb.append((char) ('a' + k % 26));
    }
    return sb.toString().getBytes(StandardCharsets.UTF_8);
  }

  public static void main(String[] args) throws Exception {
    ClientConfiguration conf = new ClientConfiguration();
    conf.setMetadataServiceUri(args[0]);
    conf.setUseV2WireProtocol(args.length > 5 && args[5].equals("V2"));
    int n = Integer.parseInt(args[4]);
    try (BookKeeper bk = BookKeeper.forConfig(conf).build()) {
      long id;
      long last;
      try (WriteHandle wh = bk.newCreateLedgerOp()
              .withEnsembleSize(Integer.parseInt(args[1]))
              .withWriteQuorumSize(Integer.parseInt(args[2]))
              .withAckQuorumSize(Integer.parseInt(args[3]))
              .withDigestType(DigestType.CRC32C)
              .withPassword(new byte[0])
              .execute().get()) {
        id = wh.getId();
        for (long i = 0; i < n; i++) {
          wh.append(entry(i));
        }
        last = wh.getLastAddConfirmed();
      }
      System.out.println("ledger " + id + " lastEntryId " + last);
    }
  }
}
