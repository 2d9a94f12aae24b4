"""Broker-level crash test (crash_test.py --mode broker): the public Pulsar protocol end to end.

Each round starts `magnetar standalone` on one data directory (journalSyncData=true), then:
1. a Reader from the earliest position checks the stored log: sequence numbers contiguous and in
   order (exactly once per position), the last one >= every sequence number whose SEND_RECEIPT
   arrived in an earlier round;
2. the durable subscription "crash-sub" must deliver from at most the first sequence number it had
   not acknowledged (what was delivered but unacked is delivered again); it consumes a random
   number of messages and acknowledges them cumulatively;
3. a producer (no batching) publishes seq M+1, M+2, ... with send_async; receipted sequence numbers
   are recorded; after a random time the broker gets SIGKILL.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.broker import BrokerError, MagnetarProcess, magnetar_bin, tail  # noqa: E402

TOPIC = "persistent://public/default/crash-test"
SUB = "crash-sub"


class BrokerFailure(Exception):
    pass


def payload(seq):
    return f"seq:{seq}:".encode() + bytes((seq * 7 + i) % 251 for i in range(seq % 300))


def parse(data):
    head, _, _ = data.partition(b":")
    if head != b"seq":
        raise BrokerFailure(f"unexpected payload {data[:20]!r}")
    seq = int(data.split(b":")[1])
    if data != payload(seq):
        raise BrokerFailure(f"payload of seq {seq} differs from what was sent")
    return seq


def start_broker(binary: str, workdir: str, round_no: int) -> tuple[MagnetarProcess, str, str]:
    """Round round_no's broker on the shared data directory: (process, pulsar:// URL, log)."""
    broker = MagnetarProcess(["journalSyncData=true"], workdir=workdir, binary=binary,
                             log_name=f"broker{round_no}.log", ports_name=f"ports{round_no}")
    try:
        endpoint = broker.start()
    except BrokerError as e:
        raise BrokerFailure(str(e)) from None
    return broker, endpoint.service_url, broker.log_path


def read_log(client):
    """All stored messages from the earliest position, as sequence numbers."""
    import pulsar

    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    seqs = []
    try:
        while True:
            try:
                msg = reader.read_next(timeout_millis=1500)
            except pulsar.Timeout:
                return seqs
            seqs.append(parse(msg.data()))
    finally:
        reader.close()


def run(kills, rng, workdir, binary=None):
    import pulsar

    binary = binary or magnetar_bin()
    receipted = -1  # highest seq with a SEND_RECEIPT
    acked = -1  # highest seq acknowledged cumulatively on the subscription
    total = 0
    for round_no in range(kills + 1):
        proc, url, log_path = start_broker(binary, workdir, round_no)
        client = pulsar.Client(url, operation_timeout_seconds=10,
                               logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            # The subscription exists from the first round on, so it retains everything unacked.
            consumer = client.subscribe(
                TOPIC, SUB, consumer_type=pulsar.ConsumerType.Exclusive,
                initial_position=pulsar.InitialPosition.Earliest,
            )
            seqs = read_log(client)
            if any(b != a + 1 for a, b in zip(seqs, seqs[1:])):
                raise BrokerFailure(f"round {round_no}: stored log not contiguous/in order")
            last = seqs[-1] if seqs else -1
            if last < receipted:
                raise BrokerFailure(
                    f"round {round_no}: lost receipted messages: receipted up to {receipted}, "
                    f"stored up to {last}"
                )
            # Redelivery: the first message now must not be past the first unacknowledged one.
            want = rng.randint(1, 2000)
            got = []
            while len(got) < want:
                try:
                    msg = consumer.receive(timeout_millis=1500)
                except pulsar.Timeout:
                    break
                got.append((parse(msg.data()), msg))
            if got and got[0][0] > acked + 1:
                raise BrokerFailure(
                    f"round {round_no}: subscription skipped unacked messages: first delivered "
                    f"{got[0][0]}, acked only up to {acked}"
                )
            if any(b[0] != a[0] + 1 for a, b in zip(got, got[1:])):
                raise BrokerFailure(f"round {round_no}: subscription delivered out of order")
            if got:
                consumer.acknowledge_cumulative(got[-1][1])
                acked = max(acked, got[-1][0])
            if round_no == kills:
                print(f"crash_test[broker]: final check: {len(seqs)} stored, in order")
                break
            producer = client.create_producer(TOPIC, batching_enabled=False,
                                              max_pending_messages=2000, block_if_queue_full=True)
            done = []

            def on_sent(res, _msg_id, seq, done=done):
                if res == pulsar.Result.Ok:
                    done.append(seq)

            deadline = time.time() + rng.uniform(0.2, 2.0)
            seq = last + 1
            while time.time() < deadline:
                producer.send_async(payload(seq), lambda r, m, s=seq: on_sent(r, m, s))
                seq += 1
            proc.kill()
            time.sleep(0.2)  # late receipts already in the client's socket buffer still count
            if done:
                receipted = max(receipted, max(done))
            total += len(done)
            print(f"crash_test[broker]: round {round_no}: {len(done)} receipts, then SIGKILL",
                  flush=True)
        except BrokerFailure as e:
            raise BrokerFailure(f"{e}\n--- broker log ---\n{tail(log_path, 40)}") from None
        except Exception as e:  # client errors (timeouts, connect failures) fail the test too
            raise BrokerFailure(
                f"round {round_no}: {type(e).__name__}: {e}\n--- broker log ---\n"
                f"{tail(log_path, 40)}"
            ) from None
        finally:
            try:
                client.close()
            except Exception:  # the broker is gone; closing may time out
                pass
            proc.kill()
    return total
