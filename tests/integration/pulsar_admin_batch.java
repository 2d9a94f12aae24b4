// Runs several pulsar-admin commands (Pulsar's own tool, org.apache.pulsar.admin.cli
// .PulsarAdminTool from Maven Central) in one JVM, as tests/java's InProcessTool does, so a Python
// test pays one JVM start for all of them. Java's single-file launch compiles it:
//
//   java -cp "$(cat tests/java/tools/target/cli.classpath)" tests/integration/pulsar_admin_batch.java \
//       client.conf commands.txt
//
// commands.txt: one command per line, arguments separated by tabs (e.g.
// "--admin-url<TAB>http://127.0.0.1:8080<TAB>brokers<TAB>list<TAB>c1"). For each it prints
// "=== exit <code>", the command's stdout, "--- stderr", its stderr.

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

public class pulsar_admin_batch {
    public static void main(String[] argv) throws Exception {
        Class<?> tool = Class.forName("org.apache.pulsar.admin.cli.PulsarAdminTool");
        Field allow = tool.getDeclaredField("allowSystemExit");
        allow.setAccessible(true);
        allow.setBoolean(null, false);
        Field lastExitCode = tool.getDeclaredField("lastExitCode");
        lastExitCode.setAccessible(true);
        Method execute = tool.getMethod("execute", String[].class);
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        List<String> lines = Files.readAllLines(Path.of(argv[1]));
        for (String line : lines) {
            if (line.isBlank()) {
                continue;
            }
            String[] args = line.split("\t");
            String[] full = new String[args.length + 1];
            full[0] = argv[0];
            System.arraycopy(args, 0, full, 1, args.length);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            int code;
            try {
                execute.invoke(null, (Object) full);
                code = lastExitCode.getInt(null);
            } catch (InvocationTargetException e) {
                e.getCause().printStackTrace();
                code = 1;
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            String so = out.toString(StandardCharsets.UTF_8).replaceAll(
                    "(?m)^Exit code is -?\\d+ \\(System\\.exit not called, as we are in test mode\\)\\R?",
                    "");
            realOut.println("=== exit " + code);
            realOut.print(so);
            realOut.println("--- stderr");
            realOut.print(err.toString(StandardCharsets.UTF_8));
        }
        realOut.flush();
        System.exit(0);
    }
}
