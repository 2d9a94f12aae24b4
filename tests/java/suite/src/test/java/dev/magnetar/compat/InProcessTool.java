package dev.magnetar.compat;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * Pulsar's pulsar-admin (PulsarAdminTool) run inside the test JVM, in a class loader of its own
 * built from the tools' classpath (the same jars the subprocess runs), the way Pulsar's own tests
 * run it: PulsarAdminTool.execute(args) with its System.exit turned off, the exit code read from
 * its lastExitCode, stdout and stderr captured. Saves a JVM start (3-5 s on 2 cores) per call.
 * One call at a time (System.out is process-wide). -Dcli.inprocess=false runs subprocesses.
 */
final class InProcessTool {
    private InProcessTool() {}

    static final boolean ENABLED = !"false".equals(System.getProperty("cli.inprocess"));

    private static ClassLoader loader;
    private static Method execute;
    private static Field lastExitCode;

    private static synchronized void load() throws Exception {
        if (loader != null) {
            return;
        }
        if (System.getProperty("log4j2.configurationFile") == null && !Env.logConfig().isEmpty()) {
            System.setProperty("log4j2.configurationFile", Env.logConfig());
        }
        List<URL> urls = new ArrayList<>();
        for (String p : Env.cliClasspath().split(java.io.File.pathSeparator)) {
            if (!p.isBlank()) {
                urls.add(Paths.get(p).toUri().toURL());
            }
        }
        loader = new URLClassLoader(urls.toArray(new URL[0]), ClassLoader.getPlatformClassLoader());
        Class<?> tool = Class.forName(Env.PULSAR_ADMIN, true, loader);
        Field allow = tool.getDeclaredField("allowSystemExit");
        allow.setAccessible(true);
        allow.setBoolean(null, false);
        lastExitCode = tool.getDeclaredField("lastExitCode");
        lastExitCode.setAccessible(true);
        execute = tool.getMethod("execute", String[].class);
    }

    /** pulsar-admin CONF ARGS in this JVM: exit code, stdout, stderr (-1 after timeoutS). */
    static synchronized Env.CliResult admin(long timeoutS, String... args) throws IOException {
        try {
            load();
        } catch (Exception e) {
            throw new IOException("cannot load " + Env.PULSAR_ADMIN + " in process", e);
        }
        String[] full = new String[args.length + 1];
        full[0] = Env.clientConf().toString();
        System.arraycopy(args, 0, full, 1, args.length);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        int[] code = {-1};
        Throwable[] failure = {null};
        Thread t = new Thread(() -> {
            try {
                execute.invoke(null, (Object) full);
                code[0] = lastExitCode.getInt(null);
            } catch (java.lang.reflect.InvocationTargetException e) {
                failure[0] = e.getCause();
                code[0] = 1;
            } catch (Throwable e) {
                failure[0] = e;
                code[0] = 1;
            }
        }, "pulsar-admin-in-process");
        t.setContextClassLoader(loader);
        t.setDaemon(true);
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        boolean done;
        try {
            t.start();
            t.join(timeoutS * 1000);
            done = !t.isAlive();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            done = false;
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
        String se = err.toString(StandardCharsets.UTF_8);
        if (failure[0] != null) {
            se += "\n" + failure[0];
        }
        // In test mode the tool's exit(code) prints this line instead of exiting; a subprocess
        // never prints it.
        String so = out.toString(StandardCharsets.UTF_8).replaceAll(
                "(?m)^Exit code is -?\\d+ \\(System\\.exit not called, as we are in test mode\\)\\R?", "");
        if (!done) {
            return new Env.CliResult(-1, so,
                    se + "\n(still running after " + timeoutS + " s)");
        }
        return new Env.CliResult(code[0], so, se);
    }
}
