// Agent drives the real Redisson client for lualock's interop tests.
//
// It is started by the Go test (tests/interop) with
//
//     java -cp REDISSON_JAR:DEPS:CLASSES Agent single|cluster WATCHDOG_MS ADDR...
//     java -cp REDISSON_JAR:DEPS:CLASSES Agent sentinel WATCHDOG_MS MASTER ADDR...
//
// where ADDR is redis://127.0.0.1:PORT (one for single, the cluster's nodes
// for cluster, the Sentinels for sentinel, which reach the primary they
// name MASTER, reading from it too) and WATCHDOG_MS is Redisson's
// lockWatchdogTimeout. Everything else is Redisson's default (on a
// Sentinel deployment: a WAIT for the replicas after each lock script). It prints
// "ready" once connected, then reads one command per line on stdin:
//
//     ID OWNER OP ARG...
//
// and answers each on stdout, in the order they finish, with
//
//     ID ok VALUE T0 T1       (T0, T1: epoch microseconds before and after the call)
//     ID err MESSAGE
//
// Redisson's lock owner is the thread, so every OWNER is one thread of its
// own: the commands of one owner run in order on it, and a blocked lock()
// of one owner never holds up another. KIND is r (RLock, the reentrant
// lock) or f (RFairLock), or one of issue 14's lock family (see familyOp
// for them and their own ops). Ops:
//
//     lock NAME KIND LEASE_MS            lock(); LEASE_MS -1: the watchdog
//     trylock NAME KIND WAIT_MS LEASE_MS tryLock(); VALUE true|false
//     unlock NAME KIND                   unlock()
//     force NAME KIND                    forceUnlock(); VALUE true|false
//     count NAME KIND                    getHoldCount()
//     held NAME KIND                     isHeldByCurrentThread()
//     loop NAME KIND N INSIDE COUNTER HOLD_US
//         N times: lock(); INCR INSIDE (an overlap when it is not 1);
//         GET COUNTER, pause HOLD_US, SET COUNTER +1; DECR INSIDE; unlock().
//         VALUE: the overlaps seen.
//     push NAME KIND LIST LABEL HOLD_MS  lock(); RPUSH LIST LABEL; pause; unlock()
//
// Semaphores and count-down latches (issue 15; no KIND; permit ids are the
// 32 hex characters Redisson's API shows):
//
//     sem.tryset NAME P                  RSemaphore.trySetPermits(P)
//     sem.acquire NAME N                 acquire(N)
//     sem.tryacquire NAME N WAIT_MS      tryAcquire(N, WAIT_MS); VALUE true|false
//     sem.release NAME N                 release(N)
//     sem.add NAME N                     addPermits(N)
//     sem.avail NAME                     availablePermits()
//     sem.drain NAME                     drainPermits()
//     sem.loop NAME N PERMITS INSIDE HOLD_US
//         N times: acquire(k), k = 1, 2, 1, 2...; INCRBY INSIDE k (an
//         over-subscription when above PERMITS); pause HOLD_US; DECRBY
//         INSIDE k; release(k). VALUE: the over-subscriptions seen.
//     psem.tryset NAME P                 RPermitExpirableSemaphore.trySetPermits(P)
//     psem.acquire NAME LEASE_MS         acquire(LEASE_MS); VALUE the permit id
//     psem.tryacquire NAME WAIT_MS LEASE_MS  tryAcquire(); VALUE the id or null
//     psem.release NAME ID               tryRelease(ID); VALUE true|false
//     psem.extend NAME ID LEASE_MS       updateLeaseTime(ID, LEASE_MS); VALUE true|false
//     psem.avail NAME                    availablePermits()
//     latch.tryset NAME COUNT            RCountDownLatch.trySetCount(COUNT)
//     latch.countdown NAME               countDown()
//     latch.count NAME                   getCount()
//     latch.await NAME WAIT_MS           await(WAIT_MS); VALUE true|false
//     mlock.trylock NAMES WAIT_MS        RedissonMultiLock over the RLocks NAMES
//                                        (comma-separated): tryLock(WAIT_MS, -1); VALUE true|false
//     mlock.unlock NAMES                 its unlock()
//
// "quit" (no id) ends it. The agent is the project's own test tool: it
// calls only Redisson's public API.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.redisson.Redisson;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;

public final class Agent {
    private static final PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    private static RedissonClient redisson;

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: Agent single|cluster WATCHDOG_MS ADDR... | Agent sentinel WATCHDOG_MS MASTER ADDR...");
            System.exit(2);
        }
        Config cfg = new Config();
        cfg.setCodec(new StringCodec());
        cfg.setLockWatchdogTimeout(Long.parseLong(args[1]));
        String[] addrs = Arrays.copyOfRange(args, 2, args.length);
        if (args[0].equals("cluster")) {
            cfg.useClusterServers().addNodeAddress(addrs);
        } else if (args[0].equals("sentinel")) {
            // Reads from the primary: the tests' shared counters are read
            // by Redisson inside the lock, and a replica's copy lags.
            cfg.useSentinelServers().setMasterName(addrs[0])
                .addSentinelAddress(Arrays.copyOfRange(addrs, 1, addrs.length))
                .setReadMode(ReadMode.MASTER);
        } else {
            cfg.useSingleServer().setAddress(addrs[0]);
        }
        redisson = Redisson.create(cfg);
        say("ready");

        Map<String, ExecutorService> owners = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("quit")) {
                break;
            }
            String[] f = line.split(" ");
            if (f.length < 3) {
                say(f[0] + " err bad command line: " + line);
                continue;
            }
            String id = f[0];
            ExecutorService owner = owners.computeIfAbsent(f[1], k -> Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "owner-" + k);
                t.setDaemon(true);
                return t;
            }));
            owner.execute(() -> run(id, Arrays.copyOfRange(f, 2, f.length)));
        }
        for (ExecutorService e : owners.values()) {
            e.shutdownNow();
        }
        redisson.shutdown();
        System.exit(0);
    }

    private static synchronized void say(String s) {
        out.println(s);
        out.flush();
    }

    private static long micros() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }

    private static RLock lock(String name, String kind) throws Exception {
        switch (kind) {
            case "f":
                return redisson.getFairLock(name);
            case "rr":
            case "rw":
            case "s":
            case "fe":
                return familyLock(name, kind);
            default:
                return redisson.getLock(name);
        }
    }

    // ---- issue 14: the lock family (family helper) ----
    //
    // Kinds: rr and rw (the read and the write lock of RReadWriteLock), s
    // (RSpinLock), fe (RFencedLock, Redisson 3.19 and later; reached by
    // reflection, so that the agent compiles against 3.16.8 too). Every op
    // above takes them; these are their own:
    //
    //     locked NAME KIND                   isLocked()
    //     rwloop NAME KIND N READERS WRITERS HOLD_US
    //         KIND rr or rw. N times: lock(); INCR READERS (rr) or WRITERS
    //         (rw); an overlap when a writer sees another writer or a
    //         reader, or a reader sees a writer; pause HOLD_US; DECR;
    //         unlock(). VALUE: the overlaps seen.
    //     token NAME fe LEASE_MS             RFencedLock.lockAndGetToken(); LEASE_MS -1: the watchdog
    //     trytoken NAME fe WAIT_MS           tryLockAndGetToken(WAIT_MS); VALUE the token or null
    //     gettoken NAME fe                   getToken()
    //     tokenloop NAME fe N LIST           N times: lockAndGetToken(); RPUSH LIST token; unlock()

    private static RLock familyLock(String name, String kind) throws Exception {
        switch (kind) {
            case "rr":
                return redisson.getReadWriteLock(name).readLock();
            case "rw":
                return redisson.getReadWriteLock(name).writeLock();
            case "s":
                return redisson.getSpinLock(name);
            default:
                Method m;
                try {
                    m = redisson.getClass().getMethod("getFencedLock", String.class);
                } catch (NoSuchMethodException e) {
                    throw new UnsupportedOperationException("this Redisson has no RFencedLock");
                }
                return (RLock) m.invoke(redisson, name);
        }
    }

    // fencedCall runs the public method NAME of the fenced lock l.
    private static Object fencedCall(RLock l, String method, Class<?>[] types, Object... args) throws Exception {
        try {
            return l.getClass().getMethod(method, types).invoke(l, args);
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof Exception) {
                throw (Exception) e.getCause();
            }
            throw e;
        }
    }

    private static String familyOp(String[] a, RLock l) throws Exception {
        Class<?>[] none = new Class<?>[0];
        Class<?>[] timed = new Class<?>[] {long.class, TimeUnit.class};
        switch (a[0]) {
            case "locked":
                return String.valueOf(l.isLocked());
            case "rwloop": {
                int n = Integer.parseInt(a[3]);
                boolean writer = a[2].equals("rw");
                RAtomicLong readers = redisson.getAtomicLong(a[4]);
                RAtomicLong writers = redisson.getAtomicLong(a[5]);
                long holdNanos = Long.parseLong(a[6]) * 1000;
                int overlaps = 0;
                for (int i = 0; i < n; i++) {
                    l.lock();
                    try {
                        if (writer) {
                            if (writers.incrementAndGet() != 1 || readers.get() != 0) {
                                overlaps++;
                            }
                        } else {
                            readers.incrementAndGet();
                            if (writers.get() != 0) {
                                overlaps++;
                            }
                        }
                        if (holdNanos > 0) {
                            LockSupport.parkNanos(holdNanos);
                        }
                        (writer ? writers : readers).decrementAndGet();
                    } finally {
                        l.unlock();
                    }
                }
                return String.valueOf(overlaps);
            }
            case "token": {
                long lease = Long.parseLong(a[3]);
                if (lease < 0) {
                    return String.valueOf(fencedCall(l, "lockAndGetToken", none));
                }
                return String.valueOf(fencedCall(l, "lockAndGetToken", timed, lease, TimeUnit.MILLISECONDS));
            }
            case "trytoken":
                return String.valueOf(fencedCall(l, "tryLockAndGetToken", timed, Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "gettoken":
                return String.valueOf(fencedCall(l, "getToken", none));
            case "tokenloop": {
                int n = Integer.parseInt(a[3]);
                for (int i = 0; i < n; i++) {
                    Object t = fencedCall(l, "lockAndGetToken", none);
                    try {
                        redisson.getList(a[4], StringCodec.INSTANCE).add(String.valueOf(t));
                    } finally {
                        l.unlock();
                    }
                }
                return "true";
            }
            default:
                throw new IllegalArgumentException("unknown op " + a[0]);
        }
    }

    // ---- end of issue 14 ----

    private static void run(String id, String[] a) {
        long t0 = micros();
        try {
            String v = op(a);
            say(id + " ok " + v + " " + t0 + " " + micros());
        } catch (Throwable e) {
            String msg = String.valueOf(e).replace('\n', ' ');
            say(id + " err " + msg);
        }
    }

    private static String op(String[] a) throws Exception {
        if (a[0].startsWith("sem.") || a[0].startsWith("psem.") || a[0].startsWith("latch.") || a[0].startsWith("mlock.")) {
            return semOp(a);
        }
        RLock l = lock(a[1], a[2]);
        switch (a[0]) {
            case "lock": {
                long lease = Long.parseLong(a[3]);
                if (lease < 0) {
                    l.lock();
                } else {
                    l.lock(lease, TimeUnit.MILLISECONDS);
                }
                return "true";
            }
            case "trylock": {
                long wait = Long.parseLong(a[3]);
                long lease = Long.parseLong(a[4]);
                return String.valueOf(l.tryLock(wait, lease, TimeUnit.MILLISECONDS));
            }
            case "unlock":
                l.unlock();
                return "true";
            case "force":
                return String.valueOf(l.forceUnlock());
            case "count":
                return String.valueOf(l.getHoldCount());
            case "held":
                return String.valueOf(l.isHeldByCurrentThread());
            case "loop": {
                int n = Integer.parseInt(a[3]);
                RAtomicLong inside = redisson.getAtomicLong(a[4]);
                RBucket<String> counter = redisson.getBucket(a[5], StringCodec.INSTANCE);
                long holdNanos = Long.parseLong(a[6]) * 1000;
                int overlaps = 0;
                for (int i = 0; i < n; i++) {
                    l.lock();
                    try {
                        if (inside.incrementAndGet() != 1) {
                            overlaps++;
                        }
                        String c = counter.get();
                        long next = (c == null ? 0 : Long.parseLong(c)) + 1;
                        if (holdNanos > 0) {
                            LockSupport.parkNanos(holdNanos);
                        }
                        counter.set(String.valueOf(next));
                        inside.decrementAndGet();
                    } finally {
                        l.unlock();
                    }
                }
                return String.valueOf(overlaps);
            }
            case "push": {
                l.lock();
                try {
                    redisson.getList(a[3], StringCodec.INSTANCE).add(a[4]);
                    Thread.sleep(Long.parseLong(a[5]));
                } finally {
                    l.unlock();
                }
                return "true";
            }
            default:
                return familyOp(a, l);
        }
    }

    // ---- issue 15: semaphores and count-down latches (sem helper) ----

    private static String semOp(String[] a) throws Exception {
        String name = a[1];
        switch (a[0]) {
            case "sem.tryset":
                return String.valueOf(redisson.getSemaphore(name).trySetPermits(Integer.parseInt(a[2])));
            case "sem.acquire":
                redisson.getSemaphore(name).acquire(Integer.parseInt(a[2]));
                return "true";
            case "sem.tryacquire":
                return String.valueOf(redisson.getSemaphore(name).tryAcquire(Integer.parseInt(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "sem.release":
                redisson.getSemaphore(name).release(Integer.parseInt(a[2]));
                return "true";
            case "sem.add":
                redisson.getSemaphore(name).addPermits(Integer.parseInt(a[2]));
                return "true";
            case "sem.avail":
                return String.valueOf(redisson.getSemaphore(name).availablePermits());
            case "sem.drain":
                return String.valueOf(redisson.getSemaphore(name).drainPermits());
            case "sem.loop":
                return String.valueOf(semLoop(name, Integer.parseInt(a[2]), Long.parseLong(a[3]), a[4], Long.parseLong(a[5])));
            case "psem.tryset":
                return String.valueOf(redisson.getPermitExpirableSemaphore(name).trySetPermits(Integer.parseInt(a[2])));
            case "psem.acquire":
                return redisson.getPermitExpirableSemaphore(name).acquire(Long.parseLong(a[2]), TimeUnit.MILLISECONDS);
            case "psem.tryacquire":
                return String.valueOf(redisson.getPermitExpirableSemaphore(name).tryAcquire(Long.parseLong(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "psem.release":
                return String.valueOf(redisson.getPermitExpirableSemaphore(name).tryRelease(a[2]));
            case "psem.extend":
                return String.valueOf(redisson.getPermitExpirableSemaphore(name).updateLeaseTime(a[2], Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "psem.avail":
                return String.valueOf(redisson.getPermitExpirableSemaphore(name).availablePermits());
            case "latch.tryset":
                return String.valueOf(redisson.getCountDownLatch(name).trySetCount(Long.parseLong(a[2])));
            case "latch.countdown":
                redisson.getCountDownLatch(name).countDown();
                return "true";
            case "latch.count":
                return String.valueOf(redisson.getCountDownLatch(name).getCount());
            case "latch.await":
                return String.valueOf(redisson.getCountDownLatch(name).await(Long.parseLong(a[2]), TimeUnit.MILLISECONDS));
            case "mlock.trylock":
                return String.valueOf(multiLock(name).tryLock(Long.parseLong(a[2]), -1, TimeUnit.MILLISECONDS));
            case "mlock.unlock":
                multiLock(name).unlock();
                return "true";
            default:
                throw new IllegalArgumentException("unknown op " + a[0]);
        }
    }

    private static RLock multiLock(String names) {
        String[] n = names.split(",");
        RLock[] locks = new RLock[n.length];
        for (int i = 0; i < n.length; i++) {
            locks[i] = redisson.getLock(n[i]);
        }
        return redisson.getMultiLock(locks);
    }

    private static int semLoop(String name, int n, long permits, String insideKey, long holdMicros) throws Exception {
        org.redisson.api.RSemaphore sem = redisson.getSemaphore(name);
        RAtomicLong inside = redisson.getAtomicLong(insideKey);
        int over = 0;
        for (int i = 0; i < n; i++) {
            int k = 1 + i % 2;
            sem.acquire(k);
            try {
                if (inside.addAndGet(k) > permits) {
                    over++;
                }
                if (holdMicros > 0) {
                    LockSupport.parkNanos(holdMicros * 1000);
                }
                inside.addAndGet(-k);
            } finally {
                sem.release(k);
            }
        }
        return over;
    }

    // ---- end of issue 15 block ----
}
