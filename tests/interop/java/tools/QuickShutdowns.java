import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;

/**
 * Lets a RocketMQ client stop at once instead of up to 3 s later. Stopping a client joins its
 * remoting layer's event thread, which sits in a 3 s poll of its event queue and sees that it
 * should stop only when the poll returns (about half of the mqadmin commands the conformance
 * tests run waited for it). A daemon thread watches the thread that stops clients; when that
 * thread waits in a service thread's stop for a thread idle in such a poll, it interrupts the
 * poll, and the service thread ends as it would after the poll's timeout. Only the JDK is used,
 * so one build serves every release's client.
 *
 * <p>Usage: QuickShutdowns MAIN_CLASS [ARGS...] runs MAIN_CLASS's main with the watch on.
 */
public final class QuickShutdowns {
  private static final String SERVICE_STOP = "org.apache.rocketmq.common.ServiceThread";
  private static final long EVERY_MS = 5;

  public static void main(String[] args) throws Exception {
    watch(Thread.currentThread());
    String[] rest = new String[args.length - 1];
    System.arraycopy(args, 1, rest, 0, rest.length);
    Class.forName(args[0]).getMethod("main", String[].class).invoke(null, (Object) rest);
  }

  /** Watches `stopper`, the thread that stops clients, until the JVM exits. */
  static void watch(Thread stopper) {
    Thread watcher = new Thread(() -> run(stopper.getId()), "quick-shutdowns");
    watcher.setDaemon(true);
    watcher.start();
  }

  private static void run(long stopperId) {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    while (true) {
      ThreadInfo info = threads.getThreadInfo(stopperId, 8);
      if (info == null) {
        return;
      }
      if (joiningAServiceThread(info)) {
        Thread joined = byIdentity(info.getLockInfo().getIdentityHashCode());
        if (joined != null && idleInATimedPoll(joined)) {
          joined.interrupt();
        }
      }
      try {
        Thread.sleep(EVERY_MS);
      } catch (InterruptedException stop) {
        return;
      }
    }
  }

  private static boolean joiningAServiceThread(ThreadInfo info) {
    if (info.getLockInfo() == null
        || !Thread.class.getName().equals(info.getLockInfo().getClassName())) {
      return false;
    }
    for (StackTraceElement frame : info.getStackTrace()) {
      if (SERVICE_STOP.equals(frame.getClassName()) && "shutdown".equals(frame.getMethodName())) {
        return true;
      }
    }
    return false;
  }

  private static Thread byIdentity(int identity) {
    for (Thread thread : Thread.getAllStackTraces().keySet()) {
      if (System.identityHashCode(thread) == identity) {
        return thread;
      }
    }
    return null;
  }

  private static boolean idleInATimedPoll(Thread thread) {
    for (StackTraceElement frame : thread.getStackTrace()) {
      if (frame.getClassName().endsWith("BlockingQueue") && "poll".equals(frame.getMethodName())) {
        return true;
      }
    }
    return false;
  }

  private QuickShutdowns() {}
}
