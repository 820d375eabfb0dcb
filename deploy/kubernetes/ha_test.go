package kubernetes_test

import (
	"context"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/ha/kubefake"
)

// podEnv is what the kubelet gives the variables set from fields.
func podEnv(e corev1.EnvVar) string {
	switch {
	case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
		return "10.1.2.3"
	case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
		return "weir-pod-abc12"
	}
	return "?"
}

// commandConfig parses a container's arguments (after the command name,
// with the kubelet's expansion) with cmd's flags and returns its
// configuration: the mounted --config file with the -D pairs over it.
func (o objects) commandConfig(t *testing.T, d *appsv1.Deployment, c *corev1.Container, flags interface {
	ParseFlags([]string) error
}, get func(string) string, defines []string) *config.Configuration {
	t.Helper()
	cfg, err := config.LoadYAML(strings.NewReader(o.mountedFile(t, d, c, get("config"))))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := config.ParseDynamic(defines)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Merge(dyn)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: %v", d.Name, err)
	}
	return cfg
}

// allowed is what the Roles bound to service account sa allow, as
// "group/resource verb".
func (o objects) allowed(t *testing.T, sa string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, b := range o.bindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa }) {
			continue
		}
		r := o.roles[b.RoleRef.Name]
		if b.RoleRef.Kind != "Role" || r == nil {
			t.Fatalf("RoleBinding %s refers to %s %s, which the overlay does not have", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		for _, rule := range r.Rules {
			if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
				t.Errorf("Role %s: a rule this test does not read: %+v", r.Name, rule)
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out[g+"/"+res+" "+v] = true
					}
				}
			}
		}
	}
	return out
}

// calls are the calls recorded, as "group/resource verb".
func calls(actions []k8stesting.Action) map[string]bool {
	out := map[string]bool{}
	for _, a := range actions {
		r := a.GetResource()
		out[r.Group+"/"+r.Resource+" "+a.GetVerb()] = true
	}
	return out
}

// TestHAOverlay renders the high availability overlay and checks it as
// TestBase checks the base, and more: two job managers with
// high-availability.type kubernetes that advertise their pod's IP for RPC
// and REST (listening on every interface, they must); task managers that
// follow the leader through the Lease; the base's options unchanged; and
// Roles that allow exactly the calls weir's Kubernetes high availability
// makes, recorded on kubefake while a job manager campaigns, records,
// resigns and is succeeded, and while a task manager follows the leader.
func TestHAOverlay(t *testing.T) {
	base := render(t, "base")
	o := render(t, "ha")

	jmDep, jm := o.container(t, "weir-jobmanager")
	tmDep, tm := o.container(t, "weir-taskmanager")
	if *jmDep.Spec.Replicas < 2 {
		t.Errorf("%d job managers: no standby", *jmDep.Spec.Replicas)
	}
	if jmDep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		t.Errorf("the job managers are recreated all at once: nothing to take over")
	}

	// The job manager's command line, expanded as the kubelet does.
	jmCmd := clustercli.JobManagerCommand(nil)
	var jmArgs []string
	for _, a := range jm.Args[1:] {
		jmArgs = append(jmArgs, expand(t, jm, a, podEnv))
	}
	if jm.Args[0] != "jobmanager" {
		t.Fatalf("job manager args %q", jm.Args)
	}
	if err := jmCmd.ParseFlags(jmArgs); err != nil {
		t.Fatalf("weir jobmanager %q: %v", jmArgs, err)
	}
	flag := func(name string) string { v, _ := jmCmd.Flags().GetString(name); return v }
	defines, _ := jmCmd.Flags().GetStringArray("define")
	cfg := o.commandConfig(t, jmDep, jm, jmCmd, flag, defines)
	hc, err := cfg.HighAvailability()
	if err != nil || hc.Type != config.HAKubernetes {
		t.Fatalf("the job managers' high availability: %+v, %v; want kubernetes", hc, err)
	}
	_, rpcPort, _ := net.SplitHostPort(flag("listen"))
	if want := "10.1.2.3:" + rpcPort; flag("advertise") != want {
		t.Errorf("the job manager advertises %q, want its pod's IP and RPC port, %s", flag("advertise"), want)
	}
	if got := port(t, jm, intstr.FromString("rpc")); strconv.Itoa(int(got)) != rpcPort {
		t.Errorf("the job manager listens on %s, its rpc port is %d", flag("listen"), got)
	}
	if h := cfg.String(config.KeyRESTAddress); h != "10.1.2.3" {
		t.Errorf("the job manager publishes REST at %q, want its pod's IP", h)
	}
	if p := port(t, jm, intstr.FromString("rest")); cfg.Int(config.KeyRESTPort) != int(p) {
		t.Errorf("rest.port %d, the container's rest port is %d", cfg.Int(config.KeyRESTPort), p)
	}
	if !strings.HasPrefix(hc.StorageDir, "file:///var/lib/weir/") {
		t.Errorf("high-availability.storageDir %q is not on the shared volume", hc.StorageDir)
	}

	// The base's options, unchanged: the overlay only adds.
	baseDep, baseJM := base.container(t, "weir-jobmanager")
	baseCfg, err := config.LoadYAML(strings.NewReader(base.mountedFile(t, baseDep, baseJM, flag("config"))))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range baseCfg.Keys() {
		if baseCfg.String(k) != cfg.String(k) {
			t.Errorf("%s is %q in the overlay, %q in the base", k, cfg.String(k), baseCfg.String(k))
		}
	}

	// Task managers: the same configuration, hence the same Lease.
	tmCmd := clustercli.TaskManagerCommand(nil)
	var tmArgs []string
	for _, a := range tm.Args[1:] {
		tmArgs = append(tmArgs, expand(t, tm, a, podEnv))
	}
	if err := tmCmd.ParseFlags(tmArgs); err != nil {
		t.Fatal(err)
	}
	tmFlag := func(name string) string { v, _ := tmCmd.Flags().GetString(name); return v }
	tmDefines, _ := tmCmd.Flags().GetStringArray("define")
	tmCfg := o.commandConfig(t, tmDep, tm, tmCmd, tmFlag, tmDefines)
	if tmHC, err := tmCfg.HighAvailability(); err != nil || tmHC.Type != hc.Type || tmHC.Kubernetes != hc.Kubernetes {
		t.Errorf("the task managers' high availability %+v, %v; the job managers' %+v", tmHC, err, hc)
	}

	// Service accounts and what their Roles allow, against what the code
	// calls.
	for d, sa := range map[*appsv1.Deployment]string{jmDep: "weir-jobmanager", tmDep: "weir-taskmanager"} {
		if d.Spec.Template.Spec.ServiceAccountName != sa || o.accounts[sa] == nil {
			t.Errorf("%s runs as service account %q, want %s, which the overlay must have", d.Name, d.Spec.Template.Spec.ServiceAccountName, sa)
		}
	}
	jmCalls, tmCalls := recordCalls(t, hc)
	for sa, used := range map[string]map[string]bool{"weir-jobmanager": jmCalls, "weir-taskmanager": tmCalls} {
		allowed := o.allowed(t, sa)
		for c := range used {
			if !allowed[c] {
				t.Errorf("%s calls %s, which its Role does not allow", sa, c)
			}
		}
		for c := range allowed {
			if !used[c] {
				t.Errorf("the Role of %s allows %s, which weir never calls", sa, c)
			}
		}
		t.Logf("%s: %v", sa, slices.Sorted(maps.Keys(used)))
	}
}

// recordCalls runs a job manager's and a task manager's use of the
// Kubernetes high availability hc configures on kubefake, and returns the
// calls each made.
func recordCalls(t *testing.T, hc config.HighAvailability) (jm, tm map[string]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := kubefake.New()
	k := hc.Kubernetes
	open := func() *ha.Kubernetes {
		s, err := ha.NewKubernetes(cli, "weir", ha.WithKubernetesClusterID(k.ClusterID), ha.WithLeaseDuration(k.LeaseDuration),
			ha.WithRenewDeadline(k.RenewDeadline), ha.WithRetryPeriod(k.RetryPeriod), ha.WithKubernetesStorageDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A job manager follows the leader while a standby, leads, records a
	// job and its checkpoints, reads them back, resigns; its successor
	// takes over, records the job anew, ends it.
	for i, addr := range []string{"a:1", "b:1"} {
		s := open()
		wctx, stop := context.WithCancel(ctx)
		leaders := s.WatchLeader(wctx)
		l, err := s.Campaign(ctx, ha.LeaderInfo{Addr: addr})
		must(err)
		if info := <-leaders; info.Addr != addr {
			t.Fatalf("the job manager follows %+v, want itself", info)
		}
		stop()
		must(l.Jobs().Put(ctx, "j", []byte("job")))
		must(l.Jobs().Put(ctx, "j", []byte("job")))
		must(l.Checkpoints().Reserve(ctx, "j", int64(100*(i+1))))
		must(l.Checkpoints().Put(ctx, "j", ha.CompletedCheckpoint{ID: int64(10 * (i + 1)), Path: "p"}))
		_, err = l.Jobs().List(ctx)
		must(err)
		_, _, err = l.Checkpoints().Latest(ctx, "j")
		must(err)
		_, err = l.Checkpoints().Reserved(ctx, "j")
		must(err)
		if i == 1 {
			must(l.Jobs().Remove(ctx, "j"))
			must(l.Checkpoints().Remove(ctx, "j"))
		}
		must(l.Resign(ctx))
	}
	jm = calls(cli.Actions())
	// A task manager, or a client, finds the leader.
	_, err := open().Campaign(ctx, ha.LeaderInfo{Addr: "c:1"})
	must(err)
	cli.ClearActions()
	follower := open()
	wctx, stop := context.WithCancel(ctx)
	if info := <-follower.WatchLeader(wctx); info.Addr != "c:1" {
		t.Fatalf("the task manager follows %+v", info)
	}
	stop()
	_, _, err = follower.Leader(ctx)
	must(err)
	tm = calls(cli.Actions())
	return jm, tm
}
