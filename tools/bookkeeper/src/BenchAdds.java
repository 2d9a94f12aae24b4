// The Java side of `magnetar bookkeeper bench`: one writer with BookKeeper's own Java client,
// at most OUTSTANDING adds in flight, entries of SIZE bytes, CRC32C, empty password, protocol v2
// (Pulsar's settings), no client-side rate limit (throttle 0, as Pulsar's broker sets it: the
// Java client's default throttle of 5,000 adds/s otherwise caps the run). Prints the same
// summary line as Magnetar's bench.
//
//   java -cp <bk.classpath> BenchAdds.java URI ENSEMBLE WRITE_QUORUM ACK_QUORUM ENTRIES SIZE OUTSTANDING
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

public class BenchAdds {
  public static void main(String[] args) throws Exception {
    ClientConfiguration conf = new ClientConfiguration();
    conf.setMetadataServiceUri(args[0]);
    conf.setUseV2WireProtocol(true);
    conf.setThrottleValue(0);
    int e = Integer.parseInt(args[1]);
    int w = Integer.parseInt(args[2]);
    int a = Integer.parseInt(args[3]);
    int n = Integer.parseInt(args[4]);
    int size = Integer.parseInt(args[5]);
    int outstanding = Integer.parseInt(args[6]);
    try (BookKeeper bk = BookKeeper.forConfig(conf).build()) {
      LedgerHandle lh = bk.createLedger(e, w, a, BookKeeper.DigestType.CRC32C, new byte[0]);
      byte[] data = new byte[size];
      Arrays.fill(data, (byte) 'x');
      long[] latUs = new long[n];
      Semaphore window = new Semaphore(outstanding);
      CountDownLatch done = new CountDownLatch(n);
      AtomicInteger errors = new AtomicInteger();
      long t0 = System.nanoTime();
      for (int i = 0; i < n; i++) {
        window.acquire();
        final int idx = i;
        final long start = System.nanoTime();
        lh.asyncAddEntry(data, (rc, l, entryId, ctx) -> {
          if (rc != 0) {
            errors.incrementAndGet();
          }
          latUs[idx] = (System.nanoTime() - start) / 1000;
          window.release();
          done.countDown();
        }, null);
      }
      done.await();
      double secs = (System.nanoTime() - t0) / 1e9;
      lh.close();
      Arrays.sort(latUs);
      System.out.println("java entries " + n + " size " + size + " adds/s " + (long) (n / secs)
          + " p50_us " + latUs[n / 2] + " p99_us " + latUs[Math.min(n - 1, (int) (0.99 * n))]
          + " max_us " + latUs[n - 1] + " errors " + errors.get());
    }
  }
}
