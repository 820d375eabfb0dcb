package web

import (
	"net/http"
	"net/url"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/procstat"
)

// The endpoints Flink's web dashboard reads before and besides a job's
// pages: its configuration (/config), the job manager's configuration,
// environment and metrics, the task managers, and Flink 2's applications.

// dashboardConfigInfo is Flink's DashboardConfiguration.
type dashboardConfigInfo struct {
	RefreshInterval int64  `json:"refresh-interval"`
	TimezoneName    string `json:"timezone-name"`
	TimezoneOffset  int64  `json:"timezone-offset"`
	FlinkVersion    string `json:"flink-version"`
	FlinkRevision   string `json:"flink-revision"`
	Features        struct {
		WebSubmit  bool `json:"web-submit"`
		WebCancel  bool `json:"web-cancel"`
		WebRescale bool `json:"web-rescale"`
		WebHistory bool `json:"web-history"`
	} `json:"features"`
}

// refreshInterval is how often the dashboard polls, in milliseconds:
// Flink's default for web.refresh-interval, which weir does not have.
const refreshInterval = 3000

// dashboardConfig is /config.
//
// flink-version carries weir's own version ("weir " and the main module's
// version from the build information, "(devel)" for a build from a work
// tree), not a Flink version: the dashboard only displays the field (in
// its header), it does not parse or compare it. A client that derives
// behaviour from a Flink version (such as Beam's Flink runner, which picks
// a runner jar by it) cannot use weir's anyway. flink-revision is the VCS
// revision and time of the build, or Flink's "<unknown>" without them.
//
// timezone-name is Go's abbreviation of the local zone ("UTC", "CET"),
// where Flink gives Java's display name ("Coordinated Universal Time");
// timezone-offset is, as in Flink, the zone's current offset from UTC in
// milliseconds.
//
// web-cancel is cancel: whether the server cancels jobs (a job's server
// given Job.Cancel; a job manager's directory, whose jobs are canceled by
// the job manager). Every other feature is false: weir accepts no jar
// uploads (web-submit), does not rescale jobs through the REST API
// (web-rescale) and keeps no history server (web-history).
func dashboardConfig(cancel bool) dashboardConfigInfo {
	name, offset := time.Now().Zone()
	c := dashboardConfigInfo{
		RefreshInterval: refreshInterval,
		TimezoneName:    name,
		TimezoneOffset:  int64(offset) * 1000,
		FlinkVersion:    "weir " + buildVersion(),
		FlinkRevision:   buildRevision(),
	}
	c.Features.WebCancel = cancel
	return c
}

func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "(devel)"
	}
	return bi.Main.Version
}

// buildRevision is Flink's "revision @ time" of the build, or Flink's
// "<unknown>".
func buildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "<unknown>"
	}
	var rev, at string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		}
	}
	switch {
	case rev == "":
		return "<unknown>"
	case at == "":
		return rev
	}
	return rev + " @ " + at
}

// configEntry is one entry of Flink's ClusterConfigurationInfo.
type configEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// maskedValue replaces a sensitive value, as Flink's
// GlobalConfiguration.HIDDEN_CONTENT does.
const maskedValue = "******"

// sensitiveParts are the substrings that make Flink hide a key's value
// (GlobalConfiguration.SENSITIVE_KEYS), matched case-insensitively. weir
// also hides every option registered as sensitive.
var sensitiveParts = []string{"password", "secret", "fs.azure.account.key", "apikey", "api-key", "auth-params", "service-key", "token", "basic-auth", "jaas.config", "http-headers"}

func sensitiveKey(key string, registered bool) bool {
	if registered {
		return true
	}
	k := strings.ToLower(key)
	for _, p := range sensitiveParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// configEntries is /jobmanager/config: every option of cfg with an
// effective value (set, or a default), sorted by key, sensitive values
// masked. Flink lists only the keys its configuration holds; weir adds the
// defaults, which are what the job runs with.
func configEntries(cfg *config.Configuration) []configEntry {
	out := []configEntry{}
	for _, o := range config.Options() {
		v, set := cfg.Get(o.Key)
		if !set {
			if !o.HasDefault {
				continue
			}
			v = o.Default
		}
		if sensitiveKey(o.Key, o.Sensitive) {
			v = maskedValue
		}
		out = append(out, configEntry{Key: o.Key, Value: v})
	}
	slices.SortFunc(out, func(a, b configEntry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// environmentInfo is Flink's EnvironmentInfo. weir runs no JVM: jvm holds
// the Go runtime's version (runtime.Version, "go1.26.0") and architecture
// (GOARCH, "amd64" as Java's os.arch says it), and options, the JVM's
// arguments, is empty, as is the classpath: a Go binary has neither.
type environmentInfo struct {
	JVM struct {
		Version string   `json:"version"`
		Arch    string   `json:"arch"`
		Options []string `json:"options"`
	} `json:"jvm"`
	Classpath []string `json:"classpath"`
}

func environment() environmentInfo {
	var e environmentInfo
	e.JVM.Version = goruntime.Version()
	e.JVM.Arch = goruntime.GOARCH
	e.JVM.Options = []string{}
	e.Classpath = []string{}
	return e
}

// applicationsOverview is Flink 2's /applications/overview. weir has no
// applications (a main method that submits jobs and is tracked as a unit):
// a job is submitted by itself, so the list is empty, as Flink's is on a
// cluster that runs no application.
type applicationsOverview struct {
	Applications []any `json:"applications"`
}

// metricEntry is one entry of Flink's metric collection: the id alone in
// a listing, with its value (a string) for ?get=.
type metricEntry struct {
	ID    string  `json:"id"`
	Value *string `json:"value,omitempty"`
}

// metricListOf answers a Flink metrics request over the metrics vals (id →
// value, ids in order): without ?get= the ids, with ?get=a,b the values of
// those of a and b that exist.
func metricListOf(q url.Values, ids []string, vals map[string]string) []metricEntry {
	out := []metricEntry{}
	get := q.Get("get")
	if get == "" {
		for _, id := range ids {
			out = append(out, metricEntry{ID: id})
		}
		return out
	}
	for _, id := range strings.Split(get, ",") {
		id = strings.TrimSpace(id)
		if v, ok := vals[id]; ok {
			out = append(out, metricEntry{ID: id, Value: &v})
		}
	}
	return out
}

// jobManagerMetrics are Flink's job manager metrics that weir has: the
// registered task managers, their slots and the running jobs, and the
// process's memory and garbage collection as JVM metrics (goMetrics).
func jobManagerMetrics(o overviewInfo) ([]string, map[string]string) {
	ids, vals := goMetrics(procstat.Read())
	ids = append([]string{"numRegisteredTaskManagers", "numRunningJobs", "taskSlotsAvailable", "taskSlotsTotal"}, ids...)
	vals["numRegisteredTaskManagers"] = strconv.Itoa(o.TaskManagers)
	vals["numRunningJobs"] = strconv.Itoa(o.JobsRunning)
	vals["taskSlotsAvailable"] = strconv.Itoa(o.SlotsAvailable)
	vals["taskSlotsTotal"] = strconv.Itoa(o.SlotsTotal)
	return ids, vals
}

// serveDashboard answers the paths that read nothing of a job or of the
// cluster: /config (cancel: whether the server cancels jobs),
// /jobmanager/environment and /applications/overview.
func serveDashboard(w http.ResponseWriter, seg []string, cancel bool) bool {
	switch {
	case len(seg) == 1 && seg[0] == "config":
		writeJSON(w, http.StatusOK, dashboardConfig(cancel))
	case len(seg) == 2 && seg[0] == "jobmanager" && seg[1] == "environment":
		writeJSON(w, http.StatusOK, environment())
	case len(seg) == 2 && seg[0] == "applications" && seg[1] == "overview":
		writeJSON(w, http.StatusOK, applicationsOverview{Applications: []any{}})
	default:
		return false
	}
	return true
}
