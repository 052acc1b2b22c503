package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

const (
	chartDir   = "helm/lakegate"
	testValues = "helm/lakegate/ci/test-values.yaml"
	// The oldest Kubernetes with lifecycle.preStop.sleep on by default.
	kubeVersion = "1.30.0"
)

func helm(t *testing.T) string {
	t.Helper()
	return tool(t, "LAKEGATE_TEST_HELM", "helm", "make test-deploy installs helm from the Go module proxy")
}

// render runs helm template on the chart with the test values and args.
func render(t *testing.T, args ...string) []byte {
	t.Helper()
	return output(t, helm(t), append([]string{"template", "lg", chartDir, "--namespace", "data",
		"--kube-version", kubeVersion, "-f", testValues}, args...)...)
}

// decoder decodes manifests strictly into the Kubernetes API types: an
// unknown or duplicated field, a kind of no registered group or a bad
// quantity is an error. Offline: the types are compiled in.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme,
		policyv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeAll decodes every document of a rendered chart.
func decodeAll(t *testing.T, manifests []byte) []runtime.Object {
	t.Helper()
	dec := decoder(t)
	var objs []runtime.Object
	for _, doc := range docSep.Split(string(manifests), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
			continue
		}
		obj, gvk, err := dec.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decode strictly: %v\n%s", err, doc)
		}
		if gvk.Kind == "" {
			t.Fatalf("no kind:\n%s", doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

// rendered is a rendered chart's objects by kind.
type rendered struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	pdb        *policyv1.PodDisruptionBudget
	secret     *corev1.Secret
	job        *batchv1.Job
	configMaps map[string]*corev1.ConfigMap
	kinds      []string
}

func sortObjects(t *testing.T, objs []runtime.Object) rendered {
	t.Helper()
	r := rendered{configMaps: map[string]*corev1.ConfigMap{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			r.deployment = o
		case *corev1.Service:
			r.service = o
		case *policyv1.PodDisruptionBudget:
			r.pdb = o
		case *corev1.Secret:
			r.secret = o
		case *batchv1.Job:
			r.job = o
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.ServiceAccount:
			if o.AutomountServiceAccountToken == nil || *o.AutomountServiceAccountToken {
				t.Error("ServiceAccount mounts its token: lakegate never calls the API")
			}
		default:
			t.Errorf("unexpected object %T", o)
		}
		r.kinds = append(r.kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	slices.Sort(r.kinds)
	return r
}

func TestChartLint(t *testing.T) {
	out := output(t, helm(t), "lint", "--strict", chartDir, "--kube-version", kubeVersion, "-f", testValues)
	if !bytes.Contains(out, []byte("0 chart(s) failed")) {
		t.Errorf("helm lint:\n%s", out)
	}
}

// TestChartStrict makes sure the decoder refuses what it must: a field
// the API does not have.
func TestChartStrict(t *testing.T) {
	out := render(t)
	bad := bytes.Replace(out, []byte("readinessProbe:"), []byte("readynessProbe:"), 1)
	dec := decoder(t)
	for _, doc := range docSep.Split(string(bad), -1) {
		if strings.Contains(doc, "readynessProbe") {
			if _, _, err := dec.Decode([]byte(doc), nil, nil); err == nil || !strings.Contains(err.Error(), "readynessProbe") {
				t.Errorf("a misspelled field decoded: %v", err)
			}
			return
		}
	}
	t.Fatal("no readinessProbe in the rendered chart")
}

func TestChart(t *testing.T) {
	r := sortObjects(t, decodeAll(t, render(t)))
	want := []string{"ConfigMap", "ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Secret", "Service", "ServiceAccount"}
	if !slices.Equal(r.kinds, want) {
		t.Fatalf("kinds %q, want %q", r.kinds, want)
	}
	d := r.deployment
	pod := d.Spec.Template
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the Deployment's selector %v does not pick its pods %v", d.Spec.Selector, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]

	t.Run("probes", func(t *testing.T) {
		for name, p := range map[string]*corev1.Probe{"/ready": c.ReadinessProbe, "/health": c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.StrVal != "http" {
				t.Errorf("probe %s: %+v", name, p)
			}
		}
		if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 32049 {
			t.Errorf("ports %+v, want http 32049", c.Ports)
		}
	})

	cfg := chartConfig(t, r, c)
	if cfg.ReadURLs != 1 {
		t.Errorf("%d standbys read from, want the test values' one (read_urls)", cfg.ReadURLs)
	}

	t.Run("drain", func(t *testing.T) {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
			t.Fatalf("no preStop sleep: %+v", c.Lifecycle)
		}
		pre := c.Lifecycle.PreStop.Sleep.Seconds
		need := pre + int64(cfg.ShutdownDelay.Seconds()) + int64(cfg.DrainTimeout.Seconds()) + 5
		if pre <= 0 || cfg.ShutdownDelay <= 0 {
			t.Errorf("preStop sleep %d s, shutdown_delay %v: want both", pre, cfg.ShutdownDelay)
		}
		if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g < need {
			t.Errorf("terminationGracePeriodSeconds %v, want at least %d (preStop + shutdown_delay + drain_timeout + 5)", g, need)
		}
		if s := d.Spec.Strategy.RollingUpdate; s == nil || s.MaxUnavailable == nil || s.MaxUnavailable.IntValue() != 0 {
			t.Errorf("rolling update %+v, want maxUnavailable 0", s)
		}
	})

	t.Run("security", func(t *testing.T) {
		ps := pod.Spec.SecurityContext
		if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
			t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", ps)
		}
		cs := c.SecurityContext
		if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
			cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
			cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext %+v: want a read-only root, no escalation, no capabilities", cs)
		}
		if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
			t.Error("the pod mounts a service account token")
		}
		// The data dir is the one writable place: an emptyDir.
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m
		}
		vols := map[string]corev1.Volume{}
		for _, v := range pod.Spec.Volumes {
			vols[v.Name] = v
		}
		data, ok := mounts[cfg.DataDir]
		if !ok || vols[data.Name].EmptyDir == nil || data.ReadOnly {
			t.Errorf("data_dir %s is no writable emptyDir mount: %+v", cfg.DataDir, data)
		}
	})

	t.Run("resources", func(t *testing.T) {
		req := c.Resources.Requests
		if req.Memory().Cmp(resource.MustParse("64Mi")) < 0 || req.Cpu().IsZero() {
			t.Errorf("requests %v: want memory of at least the measured 25-60 MiB, and cpu", req)
		}
		if lim := c.Resources.Limits.Memory(); lim.Cmp(resource.MustParse("256Mi")) < 0 {
			t.Errorf("memory limit %v: under the measured peak's 256 MiB bound", lim)
		}
		if !c.Resources.Limits.Cpu().IsZero() {
			t.Error("a CPU limit: throttling stalls streams")
		}
	})

	t.Run("service and budget", func(t *testing.T) {
		if !labels.SelectorFromSet(r.service.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			t.Errorf("Service selector %v does not pick the pods %v", r.service.Spec.Selector, pod.Labels)
		}
		if p := r.service.Spec.Ports; len(p) != 1 || p[0].TargetPort.StrVal != "http" {
			t.Errorf("Service ports %+v, want targetPort http", p)
		}
		psel, err := metav1.LabelSelectorAsSelector(r.pdb.Spec.Selector)
		if err != nil || psel.Empty() || !psel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("PodDisruptionBudget selector %v does not pick the pods %v", r.pdb.Spec.Selector, pod.Labels)
		}
		if r.pdb.Spec.MaxUnavailable == nil || r.pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", r.pdb.Spec.MaxUnavailable)
		}
	})

	t.Run("spread", func(t *testing.T) {
		ts := pod.Spec.TopologySpreadConstraints
		if len(ts) != 1 || ts[0].TopologyKey != "kubernetes.io/hostname" {
			t.Fatalf("topologySpreadConstraints %+v, want a spread over nodes", ts)
		}
		if sel, err := metav1.LabelSelectorAsSelector(ts[0].LabelSelector); err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("the spread's selector %v does not pick the pods %v", ts[0].LabelSelector, pod.Labels)
		}
	})

	t.Run("scrape", func(t *testing.T) {
		a := pod.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" || a["prometheus.io/port"] != "32049" {
			t.Errorf("pod annotations %v: want Prometheus' scrape, path /metrics and port 32049", a)
		}
	})

	t.Run("roles", func(t *testing.T) {
		// The SQL the Job runs is the tests' and the quick starts'.
		want, err := os.ReadFile(filepath.Join(repoRoot, "integration/testdata/roles.sql"))
		if err != nil {
			t.Fatal(err)
		}
		sql := r.configMaps["lg-lakegate-roles"]
		if sql == nil || strings.TrimSpace(sql.Data["roles.sql"]) != strings.TrimSpace(string(want)) {
			t.Error("the roles Job's roles.sql differs from integration/testdata/roles.sql")
		}
		j := r.job.Spec.Template.Spec
		args := strings.Join(j.Containers[0].Args, " ")
		if !strings.Contains(args, "-f /sql/roles.sql -f /sql/login.sql") || !strings.Contains(args, "ON_ERROR_STOP=1") {
			t.Errorf("roles Job args %q", args)
		}
		if r.job.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" {
			t.Errorf("roles Job hook %q, want pre-install,pre-upgrade", r.job.Annotations["helm.sh/hook"])
		}
		for _, e := range j.Containers[0].Env {
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "lakegate-postgres-admin" {
				t.Errorf("roles Job env %s is not from the admin Secret", e.Name)
			}
		}
	})
}

// TestChartRolesSQLInStep keeps the chart's copy of the roles (Helm reads
// no file outside the chart) the same as the tests'.
func TestChartRolesSQLInStep(t *testing.T) {
	a, err1 := os.ReadFile(filepath.Join(chartDir, "files/roles.sql"))
	b, err2 := os.ReadFile(filepath.Join(repoRoot, "integration/testdata/roles.sql"))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Errorf("helm/lakegate/files/roles.sql differs from integration/testdata/roles.sql (%v, %v)", err1, err2)
	}
}

// chartConfig loads the rendered ConfigMap and the container's environment
// (the Secret's keys, the env list with $(VAR) expanded as the kubelet
// does) with the server's loader, and checks what it says.
func chartConfig(t *testing.T, r rendered, c corev1.Container) configView {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil || r.secret == nil || from.SecretRef.Name != r.secret.Name {
			t.Fatalf("envFrom %+v is not the chart's Secret", from)
		}
		for k, v := range r.secret.StringData {
			env[k] = v
		}
	}
	podIP := "10.1.2.3"
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = podIP
		case e.ValueFrom == nil:
			env[e.Name] = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(e.Value, func(m string) string {
				return env[m[2:len(m)-1]]
			})
		}
	}
	var cmName string
	for _, m := range c.VolumeMounts {
		if m.MountPath == filepath.Dir(env["LAKEGATE_CONFIG"]) {
			for _, v := range r.deployment.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					cmName = v.ConfigMap.Name
				}
			}
		}
	}
	cm := r.configMaps[cmName]
	if cm == nil {
		t.Fatalf("LAKEGATE_CONFIG=%s is in no mounted ConfigMap", env["LAKEGATE_CONFIG"])
	}
	file := filepath.Join(t.TempDir(), filepath.Base(env["LAKEGATE_CONFIG"]))
	if err := os.WriteFile(file, []byte(cm.Data[filepath.Base(file)]), 0o600); err != nil {
		t.Fatal(err)
	}
	env["LAKEGATE_CONFIG"] = file
	cfg := loadConfig(t, "chart", "", env)
	if cfg.Listen != "0.0.0.0:32049" {
		t.Errorf("listen %s, want 0.0.0.0:32049", cfg.Listen)
	}
	if cfg.QueryRole != "lakegate_reader" {
		t.Errorf("query_role %q, want the SELECT-only lakegate_reader", cfg.QueryRole)
	}
	for _, db := range cfg.Databases {
		for _, u := range append([]string{db.URL}, db.ReadURLs...) {
			checkLogin(t, "database "+db.Name, u)
		}
	}
	if *r.deployment.Spec.Replicas > 1 {
		checkLogin(t, "cluster_dsn", cfg.ClusterDSN)
		if cfg.ClusterAdvertiseURL != "http://"+podIP+":32049" {
			t.Errorf("cluster_advertise_url %q, want the pod's address", cfg.ClusterAdvertiseURL)
		}
	}
	for k := range r.secret.StringData {
		if strings.Contains(cm.Data[filepath.Base(file)], k) || strings.Contains(cm.Data[filepath.Base(file)], "postgres://") {
			t.Errorf("the ConfigMap holds a secret (%s)", k)
		}
	}
	v := configView{DataDir: cfg.DataDir, ShutdownDelay: time.Duration(cfg.ShutdownDelay), DrainTimeout: time.Duration(cfg.DrainTimeout)}
	for _, db := range cfg.Databases {
		v.ReadURLs += len(db.ReadURLs)
	}
	return v
}

// TestChartRefuses: what would not start is refused when rendered.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no secrets", []string{"--set", "secrets.jwtSecret="}, "secrets.jwtSecret"},
		{"no databases", []string{"--set", "secrets.databases=null"}, "secrets.databases"},
		{"replicas without cluster_dsn", []string{"--set", "secrets.clusterDSN="}, "secrets.clusterDSN"},
		{"short cluster secret", []string{"--set", "secrets.clusterSecret=short"}, "secrets.clusterSecret"},
		{"a setting the chart owns", []string{"--set", "config.listen=127.0.0.1:1"}, "config.listen is set by the chart"},
		{"roles without an admin secret", []string{"--set", "roles.adminSecret="}, "roles.adminSecret"},
		{"a misspelled value (values.schema.json)", []string{"--set", "replicaCont=2"}, "replicaCont"},
		{"no preStop sleep", []string{"--set", "drain.preStopSleepSeconds=0"}, "preStopSleepSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"template", "lg", chartDir, "--kube-version", kubeVersion, "-f", testValues}, tc.args...)
			out, err := exec.CommandContext(t.Context(), helm(t), args...).CombinedOutput()
			if err == nil || !bytes.Contains(out, []byte(tc.want)) {
				t.Errorf("helm template %v: %v, want a failure naming %q:\n%.2000s", tc.args, err, tc.want, out)
			}
		})
	}
}

// TestChartOneReplica: one replica needs no cluster settings; an existing
// Secret replaces the chart's.
func TestChartOneReplica(t *testing.T) {
	r := sortObjects(t, decodeAll(t, render(t, "--set", "replicaCount=1", "--set", "secrets.clusterDSN=",
		"--set", "secrets.clusterSecret=", "--set", "roles.create=false")))
	for k := range r.secret.StringData {
		if strings.HasPrefix(k, "LAKEGATE_CLUSTER") {
			t.Errorf("one replica has %s", k)
		}
	}
	c := r.deployment.Spec.Template.Spec.Containers[0]
	chartConfig(t, r, c)

	r = sortObjects(t, decodeAll(t, render(t, "--set", "secrets.existingSecret=lakegate-own", "--set", "secrets.jwtSecret=")))
	if r.secret != nil {
		t.Error("a Secret rendered beside secrets.existingSecret")
	}
	if from := r.deployment.Spec.Template.Spec.Containers[0].EnvFrom; len(from) != 1 || from[0].SecretRef.Name != "lakegate-own" {
		t.Errorf("envFrom %+v, want the existing Secret lakegate-own", from)
	}
}
