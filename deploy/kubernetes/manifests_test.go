package kubernetes_test

import (
	"bytes"
	"encoding/json"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/internal/web"
)

// objects is what the base renders, decoded.
type objects struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configMaps  map[string]*corev1.ConfigMap
	claims      map[string]*corev1.PersistentVolumeClaim
	accounts    map[string]*corev1.ServiceAccount
	roles       map[string]*rbacv1.Role
	bindings    map[string]*rbacv1.RoleBinding
}

// strict decodes one rendered object's YAML into v, refusing any field v's
// type does not have.
func strict(t *testing.T, doc []byte, v any) {
	t.Helper()
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%s:\n%s", err, doc)
	}
}

// render builds dir with Kustomize, as kubectl apply -k does.
func render(t *testing.T, dir string) objects {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	o := objects{map[string]*appsv1.Deployment{}, map[string]*corev1.Service{}, map[string]*corev1.ConfigMap{}, map[string]*corev1.PersistentVolumeClaim{},
		map[string]*corev1.ServiceAccount{}, map[string]*rbacv1.Role{}, map[string]*rbacv1.RoleBinding{}}
	for _, r := range rm.Resources() {
		doc, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch k := r.GetKind(); k {
		case "Deployment":
			v := &appsv1.Deployment{}
			strict(t, doc, v)
			o.deployments[v.Name] = v
		case "Service":
			v := &corev1.Service{}
			strict(t, doc, v)
			o.services[v.Name] = v
		case "ConfigMap":
			v := &corev1.ConfigMap{}
			strict(t, doc, v)
			o.configMaps[v.Name] = v
		case "PersistentVolumeClaim":
			v := &corev1.PersistentVolumeClaim{}
			strict(t, doc, v)
			o.claims[v.Name] = v
		case "ServiceAccount":
			v := &corev1.ServiceAccount{}
			strict(t, doc, v)
			o.accounts[v.Name] = v
		case "Role":
			v := &rbacv1.Role{}
			strict(t, doc, v)
			o.roles[v.Name] = v
		case "RoleBinding":
			v := &rbacv1.RoleBinding{}
			strict(t, doc, v)
			o.bindings[v.Name] = v
		default:
			t.Errorf("the base renders a %s (%s) this test does not check", k, r.GetName())
		}
	}
	return o
}

// container returns the one container of deployment name.
func (o objects) container(t *testing.T, name string) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	d := o.deployments[name]
	if d == nil {
		t.Fatalf("no deployment %s", name)
	}
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%s has %d containers, want 1", name, n)
	}
	return d, &d.Spec.Template.Spec.Containers[0]
}

// port returns the container port named or numbered p.
func port(t *testing.T, c *corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, p.String())
	return 0
}

// expand replaces $(VAR) in s as the kubelet does with the container's
// environment, using value for variables set from fields.
func expand(t *testing.T, c *corev1.Container, s string, value func(corev1.EnvVar) string) string {
	t.Helper()
	for _, e := range c.Env {
		s = strings.ReplaceAll(s, "$("+e.Name+")", value(e))
	}
	if strings.Contains(s, "$(") {
		t.Fatalf("container %s: %q names a variable it does not set", c.Name, s)
	}
	return s
}

// mountedFile checks that file is a key of a ConfigMap mounted in d's
// container, and returns the ConfigMap's value for it.
func (o objects) mountedFile(t *testing.T, d *appsv1.Deployment, c *corev1.Container, file string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if path.Dir(file) != path.Clean(m.MountPath) {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cm := o.configMaps[v.ConfigMap.Name]
				if cm == nil {
					t.Fatalf("%s mounts ConfigMap %s, which the base does not have", d.Name, v.ConfigMap.Name)
				}
				data, ok := cm.Data[path.Base(file)]
				if !ok {
					t.Fatalf("ConfigMap %s has no key %s", cm.Name, path.Base(file))
				}
				return data
			}
		}
	}
	t.Fatalf("%s: nothing mounted gives %s", d.Name, file)
	return ""
}

// secretEnv checks that c's environment sets every one of names from a
// Secret, and that each is a variable weir reads.
func secretEnv(t *testing.T, c *corev1.Container, names ...string) {
	t.Helper()
	for _, n := range names {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == n })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil {
			t.Errorf("container %s does not set %s from a Secret", c.Name, n)
		}
		if _, ok := clustercli.EnvSecrets()[n]; !ok {
			t.Errorf("container %s sets %s, which weir does not read", c.Name, n)
		}
	}
}

// TestBase renders the Kustomize base, decodes every object strictly into
// Kubernetes' types and checks that the pieces fit: the arguments are
// flags weir's commands take; the configuration file is mounted where
// --config points and holds options weir accepts; the Service selects the
// job manager's pods and forwards to its RPC and REST ports; task
// managers dial that Service at the RPC port and advertise their pod's IP;
// the probes ask weir's REST port at its unauthenticated health path;
// the tokens come from a Secret; and the checkpoint directory lies on the
// volume every process mounts.
func TestBase(t *testing.T) {
	o := render(t, "base")

	jmDep, jm := o.container(t, "weir-jobmanager")
	tmDep, tm := o.container(t, "weir-taskmanager")
	for _, d := range []*appsv1.Deployment{jmDep, tmDep} {
		sel := d.Spec.Selector.MatchLabels
		for k, v := range sel {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("%s: its selector %v does not select its pods %v", d.Name, sel, d.Spec.Template.Labels)
			}
		}
	}
	if *jmDep.Spec.Replicas != 1 || jmDep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("one job manager at a time: replicas %d, strategy %s", *jmDep.Spec.Replicas, jmDep.Spec.Strategy.Type)
	}

	// The job manager's command line, as weir jobmanager parses it.
	if len(jm.Args) == 0 || jm.Args[0] != "jobmanager" {
		t.Fatalf("job manager args %q", jm.Args)
	}
	jmCmd := clustercli.JobManagerCommand(nil)
	if err := jmCmd.ParseFlags(jm.Args[1:]); err != nil {
		t.Fatalf("weir jobmanager %q: %v", jm.Args[1:], err)
	}
	listen, _ := jmCmd.Flags().GetString("listen")
	cfgFile, _ := jmCmd.Flags().GetString("config")
	cfg, err := config.LoadYAML(strings.NewReader(o.mountedFile(t, jmDep, jm, cfgFile)))
	if err != nil {
		t.Fatalf("%s: %v", cfgFile, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: %v", cfgFile, err)
	}
	secretEnv(t, jm, clustercli.EnvClusterAuthToken, clustercli.EnvRESTAuthToken)
	_, rpcPort, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	if got := port(t, jm, intstr.FromString("rpc")); strconv.Itoa(int(got)) != rpcPort {
		t.Errorf("the job manager listens on %s, its rpc port is %d", listen, got)
	}
	restPort := port(t, jm, intstr.FromString("rest"))
	if cfg.Int(config.KeyRESTPort) != int(restPort) || cfg.String(config.KeyRESTBindAddress) != "0.0.0.0" {
		t.Errorf("rest.port %d on %s, the container's rest port is %d", cfg.Int(config.KeyRESTPort), cfg.String(config.KeyRESTBindAddress), restPort)
	}
	for what, p := range map[string]*corev1.Probe{"readiness": jm.ReadinessProbe, "liveness": jm.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != web.HealthPath || port(t, jm, p.HTTPGet.Port) != restPort {
			t.Errorf("the job manager's %s probe %+v: want GET %s on the REST port", what, p, web.HealthPath)
		}
	}

	// The Service: the job manager's pods, its two ports.
	svc := o.services["weir-jobmanager"]
	if svc == nil {
		t.Fatal("no Service weir-jobmanager")
	}
	for k, v := range svc.Spec.Selector {
		if jmDep.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %v, the job manager's pods are %v", svc.Spec.Selector, jmDep.Spec.Template.Labels)
		}
	}
	if tmDep.Spec.Template.Labels["app.kubernetes.io/component"] == svc.Spec.Selector["app.kubernetes.io/component"] {
		t.Error("the Service selects the task managers too")
	}
	svcPorts := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = p.Port
		if got := port(t, jm, p.TargetPort); p.Name == "rpc" && strconv.Itoa(int(got)) != rpcPort || p.Name == "rest" && got != restPort {
			t.Errorf("Service port %s forwards to %d", p.Name, got)
		}
	}

	// The task managers' command line, with the kubelet's expansion.
	if len(tm.Args) == 0 || tm.Args[0] != "taskmanager" {
		t.Fatalf("task manager args %q", tm.Args)
	}
	var args []string
	for _, a := range tm.Args[1:] {
		args = append(args, expand(t, tm, a, func(e corev1.EnvVar) string {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
				return "10.1.2.3"
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
				return "weir-taskmanager-abc12"
			}
			return "?"
		}))
	}
	tmCmd := clustercli.TaskManagerCommand(nil)
	if err := tmCmd.ParseFlags(args); err != nil {
		t.Fatalf("weir taskmanager %q: %v", args, err)
	}
	jmAddr, _ := tmCmd.Flags().GetString("jobmanager")
	if want := net.JoinHostPort(svc.Name, strconv.Itoa(int(svcPorts["rpc"]))); jmAddr != want {
		t.Errorf("task managers dial %s, the job manager's Service is %s", jmAddr, want)
	}
	if id, _ := tmCmd.Flags().GetString("id"); id != "weir-taskmanager-abc12" {
		t.Errorf("task manager id %q, want the pod's name", id)
	}
	dataListen, _ := tmCmd.Flags().GetString("data-listen")
	tmFile, _ := tmCmd.Flags().GetString("config")
	defines, _ := tmCmd.Flags().GetStringArray("define")
	tmCfg, err := config.LoadYAML(strings.NewReader(o.mountedFile(t, tmDep, tm, tmFile)))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := config.ParseDynamic(defines)
	if err != nil {
		t.Fatal(err)
	}
	tmCfg.Merge(dyn)
	if err := tmCfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if h := tmCfg.String(config.KeyTaskManagerHost); h != "10.1.2.3" {
		t.Errorf("a task manager on %s advertises %q, want its pod's IP", dataListen, h)
	}
	_, dataPort, err := net.SplitHostPort(dataListen)
	if err != nil {
		t.Fatal(err)
	}
	if got := port(t, tm, intstr.FromString("data")); strconv.Itoa(int(got)) != dataPort {
		t.Errorf("the data plane listens on %s, the container's data port is %d", dataListen, got)
	}
	if p := tm.LivenessProbe; p == nil || p.TCPSocket == nil || port(t, tm, p.TCPSocket.Port) != port(t, tm, intstr.FromString("data")) {
		t.Errorf("the task manager's liveness probe %+v: want a TCP probe of the data port", p)
	}
	secretEnv(t, tm, clustercli.EnvClusterAuthToken)

	// Checkpoints on the volume every process mounts.
	dir := cfg.String(config.KeyCheckpointingDir)
	local, ok := strings.CutPrefix(dir, "file://")
	if !ok {
		t.Fatalf("execution.checkpointing.dir %q: the base keeps checkpoints on its volume", dir)
	}
	for _, d := range []*appsv1.Deployment{jmDep, tmDep} {
		c := &d.Spec.Template.Spec.Containers[0]
		onClaim := false
		for _, m := range c.VolumeMounts {
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.PersistentVolumeClaim != nil && strings.HasPrefix(local, path.Clean(m.MountPath)+"/") {
					pvc := o.claims[v.PersistentVolumeClaim.ClaimName]
					if pvc == nil || !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
						t.Errorf("%s: claim %s missing or not ReadWriteMany", d.Name, v.PersistentVolumeClaim.ClaimName)
					}
					onClaim = true
				}
			}
		}
		if !onClaim {
			t.Errorf("%s does not mount the volume %s is on", d.Name, dir)
		}
		// A read-only root: whatever weir writes has a volume.
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			continue
		}
		for _, need := range []string{"/tmp", c.WorkingDir} {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return path.Clean(m.MountPath) == path.Clean(need) }) {
				t.Errorf("%s: the root is read-only and nothing is mounted at %s", d.Name, need)
			}
		}
	}
}
