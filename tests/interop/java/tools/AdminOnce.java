import java.lang.reflect.InvocationTargetException;

/**
 * One mqadmin command line, as the `mqadmin` script runs it (MQAdminStartup.main), then exits
 * as soon as the command has returned. A plain JVM exit waits seconds more for the threads of
 * the admin client's remoting layer to wind down, which the command's output never depends on.
 * A command that calls System.exit itself exits with its own status, as under the script. The
 * admin client's own stop is quick too (QuickShutdowns).
 *
 * <p>Found by name, so that one build serves every release's tools on the class path.
 *
 * <p>Usage: AdminOnce SUBCOMMAND [OPTIONS...]
 */
public final class AdminOnce {
  public static void main(String[] args) throws Exception {
    QuickShutdowns.watch(Thread.currentThread());
    int status = 0;
    try {
      Class.forName("org.apache.rocketmq.tools.command.MQAdminStartup")
          .getMethod("main", String[].class)
          .invoke(null, (Object) args);
    } catch (InvocationTargetException failure) {
      failure.getCause().printStackTrace();
      status = 1;
    }
    System.out.flush();
    System.err.flush();
    Runtime.getRuntime().halt(status);
  }

  private AdminOnce() {}
}
