// Package web serves a running job's REST API: Flink's paths and JSON
// field names where Flink has them (so that Flink's tooling reads it),
// weir's own checkpoint cut, and Prometheus metrics at /metrics.
//
//	GET /config                                            the dashboard's configuration
//	GET /overview                                          the cluster
//	GET /taskmanagers                                      the task managers
//	GET /taskmanagers/:tmid                                its details, slots and memory
//	GET /taskmanagers/:tmid/metrics                        Go's memory as JVM metrics (?get=)
//	GET /taskmanagers/:tmid/{logs,log,stdout,thread-dump,profiler}
//	GET /jobmanager/{logs,log,stdout,thread-dump,profiler} no log files, no profiler; goroutines
//	GET /jobmanager/config                                 the configuration, secrets masked
//	GET /jobmanager/environment                            the Go runtime
//	GET /jobmanager/metrics                                task managers, slots, jobs, memory
//	GET /applications/overview                             Flink 2's applications: none
//	GET /jars                                              none; other /jars requests: 501
//	GET /jobs                                              ids and states
//	GET /jobs/overview                                     one line per job
//	GET /jobs/:jobid                                       the job, its vertices and plan
//	PATCH /jobs/:jobid?mode=cancel                         cancel the job (Job.Cancel)
//	GET /jobs/:jobid/yarn-cancel                           cancel, as Flink's dashboard does
//	POST /jobs/:jobid/stop, /jobs/:jobid/savepoints        stop with a savepoint, take one
//	GET /jobs/:jobid/savepoints/:triggerid                 its status
//	POST /jobs/:jobid/checkpoints                          take a checkpoint now
//	GET /jobs/:jobid/checkpoints/:triggerid                its status
//	GET /jobs/:jobid/plan                                  the plan
//	GET /jobs/:jobid/config                                the execution configuration
//	GET /jobs/:jobid/jobmanager/{config,environment}       as /jobmanager's
//	GET /jobs/:jobid/metrics                               uptime, restarts, checkpoints (?get=)
//	GET /jobs/:jobid/exceptions                            latest failures (?maxExceptions=)
//	GET /jobs/:jobid/resource-requirements                 each vertex's parallelism
//	PUT /jobs/:jobid/resource-requirements                 501: rescale through a savepoint
//	GET /jobs/:jobid/vertices/:vertexid                    a vertex's subtasks
//	GET /jobs/:jobid/vertices/:vertexid/backpressure       backpressure levels
//	GET /jobs/:jobid/vertices/:vertexid/watermarks         subtask watermarks
//	GET /jobs/:jobid/vertices/:vertexid/metrics            subtask metrics (?get=)
//	GET /jobs/:jobid/vertices/:vertexid/accumulators       none: weir has no accumulators
//	GET /jobs/:jobid/vertices/:vertexid/subtasks/accumulators
//	GET /jobs/:jobid/vertices/:vertexid/subtasktimes       when each subtask was deployed
//	GET /jobs/:jobid/vertices/:vertexid/subtasks/:index    a subtask's current attempt
//	GET /jobs/:jobid/vertices/:vertexid/subtasks/:index/attempts/:attempt[/accumulators]
//	GET /jobs/:jobid/vertices/:vertexid/taskmanagers       its subtasks by task manager
//	GET /jobs/:jobid/vertices/:vertexid/flamegraph         disabled, as Flink's by default
//	GET /jobs/:jobid/vertices/:vertexid/subtasks/metrics   aggregated (?get=, ?agg=, ?subtasks=)
//	GET /jobs/:jobid/checkpoints                           counts, summary, latest, history
//	GET /jobs/:jobid/checkpoints/config                    checkpoint configuration
//	GET /jobs/:jobid/checkpoints/details/:checkpointid     one checkpoint, per vertex
//	GET /jobs/:jobid/checkpoints/details/:checkpointid/subtasks/:vertexid
//	GET /jobs/:jobid/checkpoints/:checkpointid/cut         weir: the cut, drawn as data
//	GET /metrics                                           Prometheus text format
//	GET /flink/...                                         Flink's dashboard (WithFlinkDashboard)
//
// docs/flink-rest.md lists the endpoints and the fields whose values
// differ in meaning from Flink's.
//
// Where weir has no value for one of Flink's fields it answers what Flink
// does when the feature is absent (an empty list, -1 for a port); the
// types' comments say which fields differ in meaning from Flink's. A job
// manager's Directory serves /config, /jobmanager/environment,
// /jobmanager/metrics, /applications/overview, /jobmanager/config given
// the job manager's configuration (WithConfig), and /taskmanagers given
// the registered task managers (ClusterInfo.Registered).
//
// weir keeps no log files and has no profiler: the log lists are empty,
// /log and /stdout say where the log goes (in text, which the dashboard
// shows as the file), the profiler lists no profiles and a request for
// one is 501. The thread dump lists the process's goroutines.
//
// Vertex ids are, as in Flink, 32 hexadecimal digits: the first 16 bytes
// of the SHA-256 of the vertex's uid (its head operator's uid), so they
// are stable across runs of the same job. A malformed id is answered with
// 400, an unknown one with 404, both with Flink's error body
// {"errors":["..."]}.
//
// The server reads the job master through its query methods and never
// blocks the job: statistics are copied on the job master's goroutine,
// counters are read atomically. A background sampler keeps the last two
// readings of each subtask's backpressured time, so that the backpressure
// endpoint reports a ratio over the last sampling interval.
//
// Every other path answers GET and HEAD only. A request that cancels a
// job must, besides the credentials every request needs, come from the
// API's own origin (its Origin and Sec-Fetch-Site headers, when a browser
// sends them) and, on a server without a token, name a loopback host, so
// that neither another site's page nor one rebinding its name to
// 127.0.0.1 can cancel a job from a browser on the machine.
//
// Listening anywhere but on a loopback address requires a token
// (rest.auth-token), checked on every request in constant time: as a
// bearer token, or, for browsers, through a session cookie. The login
// page, GET /login, served without credentials like the UI's assets,
// POSTs the token (pasted, or from a link's #token=... fragment) to
// /login, which checks it and the request's origin and sets an HttpOnly,
// SameSite=Strict cookie (Secure over TLS) holding an expiry time signed
// with a key of the process, nothing of the token. A browser opening the
// UI without credentials is sent to the login page. GET /healthz answers
// "ok" without credentials, for probes, and tells nothing else.
package web
