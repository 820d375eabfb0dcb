import java.time.Duration;
import java.util.Collection;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.common.Node;

/**
 * Waits until a Kafka broker answers metadata requests, or a deadline passes.
 *
 * <p>Usage: {@code java -cp 'LIBS/*' Ready.java BOOTSTRAP SECONDS}. start.sh runs
 * it, with the broker's own jars, once the broker's port accepts connections.
 * An open port is not enough: a KRaft broker binds its listener before it has
 * caught up with the metadata log and been unfenced, and until then it cannot
 * serve the tests. This asks for the cluster's nodes (DescribeCluster) and the
 * list of topics (Metadata) and exits 0 once both answer with at least one
 * live broker; it exits 1 with the last error at the deadline.
 */
public class Ready {
    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: java -cp 'LIBS/*' Ready.java BOOTSTRAP SECONDS");
            System.exit(2);
        }
        String bootstrap = args[0];
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(args[1]));

        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "weir-kafka-ready");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");

        String last = "no answer yet";
        Admin admin = Admin.create(props);
        try {
            while (System.nanoTime() < deadline) {
                // Wait at most 5 s for an answer, and never past the deadline.
                long wait = Math.max(1, Math.min(TimeUnit.SECONDS.toNanos(5), deadline - System.nanoTime()));
                try {
                    DescribeClusterResult cluster = admin.describeCluster();
                    Collection<Node> nodes = cluster.nodes().get(wait, TimeUnit.NANOSECONDS);
                    String clusterId = cluster.clusterId().get(wait, TimeUnit.NANOSECONDS);
                    Set<String> topics = admin.listTopics(new ListTopicsOptions().listInternal(true))
                            .names().get(wait, TimeUnit.NANOSECONDS);
                    if (!nodes.isEmpty()) {
                        System.out.println("ready: cluster " + clusterId + ", brokers " + nodes
                                + ", " + topics.size() + " topics");
                        return;
                    }
                    last = "the cluster has no live broker yet";
                } catch (ExecutionException e) {
                    last = String.valueOf(e.getCause());
                } catch (TimeoutException e) {
                    last = "no answer within " + TimeUnit.NANOSECONDS.toMillis(wait) + " ms";
                }
                Thread.sleep(250);
            }
        } finally {
            // Do not wait for calls still in flight: the answer is known.
            admin.close(Duration.ZERO);
        }
        System.out.println("not ready: " + last);
        System.exit(1);
    }
}
