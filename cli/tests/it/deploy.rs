//! deploy/ as a platform team would check it before use: the Kubernetes Jobs against the
//! Kubernetes API's schema (kubernetes-validate, strict), and the Airflow DAG loaded by
//! Airflow's own DagBag. Both come from `scripts/install-deploy-checks.sh` (run on first use);
//! where they cannot be installed the tests skip loudly, and under `CI=true` they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use test_support::repo_root;

/// The checkers' Python, or `None` (with a loud note) where they cannot be installed, outside CI.
fn checkers(test: &str) -> Option<PathBuf> {
    test_support::or_skip(test, test_support::deploy_checks_python())
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

fn validate(python: &Path, files: &[PathBuf]) -> Output {
    Command::new(python)
        .args(["-m", "kubernetes_validate", "--strict", "--kubernetes-version", "1.31"])
        .args(files)
        .output()
        .expect("run kubernetes-validate")
}

#[test]
fn the_kubernetes_jobs_match_the_kubernetes_schema_and_map_exit_codes() {
    let Some(python) = checkers("the_kubernetes_jobs_match_the_kubernetes_schema_and_map_exit_codes") else { return };
    let deploy = repo_root().join("deploy");
    let jobs = [deploy.join("kubernetes-indexed-job.yaml"), deploy.join("kubernetes-finalize-job.yaml")];
    let credentials = deploy.join("kubernetes-credentials.yaml");
    // kubernetes-validate names each resource by `metadata.name` and stops without one; the
    // Jobs have `generateName` (a Kubernetes field like any other), so it checks copies that
    // name them.
    let named = tempfile::tempdir().expect("tempdir");
    let copies: Vec<PathBuf> = jobs
        .iter()
        .map(|job| {
            let text = std::fs::read_to_string(job).expect("job").replace("  generateName: ", "  name: ");
            let copy = named.path().join(job.file_name().expect("a file name"));
            std::fs::write(&copy, text).expect("write a copy");
            copy
        })
        .collect();
    let output = validate(&python, &[copies[0].clone(), copies[1].clone(), credentials.clone()]);
    assert!(output.status.success(), "{}", text(&output));
    // Two Jobs, and the ServiceAccount and Secret they name.
    assert_eq!(text(&output).matches("passed").count(), 4, "{}", text(&output));
    let credentials = std::fs::read_to_string(&credentials).expect("credentials");
    for job in &jobs {
        let job = std::fs::read_to_string(job).expect("job");
        // A new run is `kubectl create` again: no fixed name to collide with the last run's.
        assert!(job.contains("  generateName: ") && !job.contains("\n  name: "), "{job}");
        assert!(job.contains("serviceAccountName: attention-classifier"), "{job}");
        assert!(job.contains("name: corpus-s3-credentials"), "{job}");
    }
    assert!(credentials.contains("kind: ServiceAccount\nmetadata:\n  name: attention-classifier"), "{credentials}");
    assert!(credentials.contains("kind: Secret\nmetadata:\n  name: corpus-s3-credentials"), "{credentials}");

    // The policy the issue asks for: 1 and 2 fail the index, 75 is retried.
    let job = std::fs::read_to_string(&copies[0]).expect("job");
    let rules = job.split("podFailurePolicy:").nth(1).expect("a podFailurePolicy");
    let fail_index = rules.find("action: FailIndex").expect("FailIndex");
    let count = rules.find("action: Count").expect("Count");
    assert!(rules[fail_index..count].contains("values: [1, 2]"), "{rules}");
    assert!(rules[count..].contains("values: [75]"), "{rules}");

    // The check can fail: a misspelt field is refused.
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, job.replace("  podFailurePolicy:", "  podFailurPolicy:")).expect("write");
    let output = validate(&python, &[broken]);
    assert!(!output.status.success(), "a misspelt field passed: {}", text(&output));
    assert!(text(&output).contains("podFailurPolicy"), "{}", text(&output));
}

#[test]
fn airflow_loads_the_dag_with_a_pod_per_shard_then_finalize() {
    let Some(python) = checkers("airflow_loads_the_dag_with_a_pod_per_shard_then_finalize") else { return };
    let home = tempfile::tempdir().expect("AIRFLOW_HOME");
    let load = |dag: &Path| {
        let script = "import sys\n\
            import pendulum\n\
            from airflow.models import DagBag\n\
            bag = DagBag(dag_folder=sys.argv[1])\n\
            if bag.import_errors:\n    sys.exit('import errors: %s' % bag.import_errors)\n\
            dag = bag.dags['classify_corpus']\n\
            print('tasks', sorted(t.task_id for t in dag.tasks))\n\
            print('upstream of finalize', sorted(dag.get_task('finalize').upstream_task_ids))\n\
            print('params', sorted(dag.params.keys()), dag.params['shards'])\n\
            print('schedule', dag.schedule)\n\
            shard, finalize = dag.get_task('classify_shard'), dag.get_task('finalize')\n\
            kwargs = shard.partial_kwargs\n\
            print('shard pod', kwargs['image'], kwargs['cmds'], kwargs['service_account_name'])\n\
            print('finalize pod', finalize.image, finalize.cmds, finalize.arguments[:1])\n\
            from airflow.sdk.definitions._internal.templater import SandboxedEnvironment\n\
            output = SandboxedEnvironment().from_string(finalize.arguments[1])\n\
            print('finalizes', output.render(params={'output': 's3://out/day={ds}/'}, ds='2026-11-25'))\n\
            security = kwargs['container_security_context']\n\
            print('read-only root', security.read_only_root_filesystem, kwargs['security_context'].run_as_user)\n\
            print('cache', [(m.name, m.mount_path) for m in kwargs['volume_mounts']])\n\
            print('secret', [e.secret_ref.name for e in kwargs['env_from']])\n\
            print('shard env', sorted(kwargs['env_vars']))\n\
            import types\n\
            from airflow.providers.openlineage.plugins import macros as lineage\n\
            run = types.SimpleNamespace(logical_date=pendulum.datetime(2026, 11, 25, tz='UTC'), clear_number=0, conf={}, run_id='scheduled__2026-11-25')\n\
            ti = types.SimpleNamespace(dag_id=dag.dag_id, task_id='classify_shard', try_number=1, map_index=3, logical_date=run.logical_date, dag_run=run, get_template_context=lambda: {'dag_run': run})\n\
            plugin = types.SimpleNamespace(lineage_parent_id=lineage.lineage_parent_id, lineage_root_parent_id=lineage.lineage_root_parent_id)\n\
            params = {'input': 's3://in/day={ds}/', 'output': 's3://out/day={ds}/', 'model': None, 'shards': 8, 'output_format': 'delta', 'metrics_push': 'http://pgw:9091', 'openlineage_url': None, 'openlineage_namespace': 'lake'}\n\
            def render(env, macros):\n    return {k: SandboxedEnvironment().from_string(v).render(params=params, ds='2026-11-25', ti=ti, task_instance=ti, dag=dag, macros=macros) for k, v in env.items()}\n\
            print('pod 3', render(kwargs['env_vars'], types.SimpleNamespace(OpenLineageProviderPlugin=plugin)))\n\
            print('without the provider', render({k: v for k, v in kwargs['env_vars'].items() if 'PARENT' in k}, types.SimpleNamespace()))\n\
            sys.path.insert(0, sys.argv[2])\n\
            from airflow_dag import shard_arguments\n\
            print('arguments', shard_arguments(params))\n\
            print('with a model', shard_arguments({**params, 'model': 's3://m/san/'}))\n";
        Command::new(&python)
            .args(["-W", "ignore", "-c", script])
            .arg(dag)
            .arg(dag.parent().expect("a folder"))
            .env("AIRFLOW_HOME", home.path())
            .output()
            .expect("run python")
    };
    let dag = repo_root().join("deploy").join("airflow_dag.py");
    let output = load(&dag);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("tasks ['classify_shard', 'finalize', 'shard_pods']"), "{said}");
    // Input, output, model and shard count are parameters of each run; it runs daily.
    assert!(
        said.contains(
            "params ['input', 'metrics_push', 'model', 'openlineage_namespace', 'openlineage_url', 'output', \
             'output_format', 'shards'] 8"
        ),
        "{said}"
    );
    assert!(said.contains("schedule @daily"), "{said}");
    assert!(said.contains("upstream of finalize ['classify_shard']"), "{said}");
    // Every task is a pod of the image, run as the Kubernetes Job runs it.
    let image = "registry.example.com/attention-classifier/pipeline:0.1.0";
    assert!(said.contains(&format!("shard pod {image} ['/deploy/run-shard.sh'] attention-classifier")), "{said}");
    assert!(said.contains(&format!("finalize pod {image} ['pipeline'] ['finalize']")), "{said}");
    assert!(said.contains("finalizes s3://out/day=2026-11-25/"), "{said}");
    assert!(said.contains("read-only root True 10001"), "{said}");
    assert!(said.contains("cache [('model-cache', '/home/pipeline/.cache')]"), "{said}");
    assert!(said.contains("secret ['corpus-s3-credentials']"), "{said}");
    // Shard 3 of 8 gets run-shard.sh's variables, with the day filled in, and its Airflow task
    // as the parent run of its lineage events (the OpenLineage provider's own macros).
    let pod = said.lines().find(|l| l.starts_with("pod 3 ")).expect("pod 3");
    for expected in [
        "'PIPELINE_INPUT': 's3://in/day=2026-11-25/'",
        "'PIPELINE_OUTPUT': 's3://out/day=2026-11-25/'",
        "'SHARD_COUNT': '8'",
        "'SHARD_INDEX': '3'",
        "'PIPELINE_OUTPUT_FORMAT': 'delta'",
        "'PIPELINE_JOB_NAME': 'classify_corpus'",
        "'PIPELINE_METRICS_PUSH': 'http://pgw:9091'",
        "'OPENLINEAGE_URL': ''",
        "'OPENLINEAGE_NAMESPACE': 'lake'",
    ] {
        assert!(pod.contains(expected), "{expected} in {pod}");
    }
    let parent =
        pod.split("'OPENLINEAGE_PARENT_ID': '").nth(1).and_then(|rest| rest.split('\'').next()).expect("parent");
    let parts: Vec<&str> = parent.split('/').collect();
    assert_eq!(parts.len(), 3, "namespace/job/runId: {parent}");
    assert_eq!(parts[1], "classify_corpus.classify_shard", "{parent}");
    assert_eq!(parts[2].len(), 36, "a UUID: {parent}");
    let root =
        pod.split("'OPENLINEAGE_ROOT_PARENT_ID': '").nth(1).and_then(|rest| rest.split('\'').next()).expect("root");
    assert!(root.contains("/classify_corpus/"), "{root}");
    assert!(
        said.contains("without the provider {'OPENLINEAGE_PARENT_ID': '', 'OPENLINEAGE_ROOT_PARENT_ID': ''}"),
        "{said}"
    );
    assert!(said.contains("arguments ['--threads', '2']"), "{said}");
    assert!(said.contains("with a model ['--threads', '2', '--model', 's3://m/san/']"), "{said}");

    // The check can fail: a DAG file that does not import is reported.
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("airflow_dag.py");
    let source = std::fs::read_to_string(&dag).expect("dag");
    std::fs::write(
        &broken,
        source.replace("from airflow.decorators import dag, task", "from airflow.decorators import dag, tsak"),
    )
    .expect("write");
    let output = load(&broken);
    assert!(!output.status.success(), "a broken DAG loaded: {}", text(&output));
    assert!(text(&output).contains("import errors"), "{}", text(&output));
}

/// What ties the Dockerfile to the deploy files, beyond what `container_image.rs` sees by
/// building and running it: both sources of the binary (compiled from the sources, or prebuilt
/// by CI) give the final stage the same files, the compiled binary is stripped, and the image
/// the deploy files name is the one the README says to build.
#[test]
fn the_dockerfile_provides_what_the_deploy_files_call() {
    let root = repo_root();
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("Dockerfile");
    let stage = |name: &str| -> &str {
        dockerfile
            .split("\nFROM ")
            .find(|stage| stage.lines().next().is_some_and(|line| line.ends_with(&format!(" AS {name}"))))
            .unwrap_or_else(|| panic!("no stage {name}"))
    };
    let (compiled, prebuilt) = (stage("compiled"), stage("prebuilt"));
    assert!(compiled.contains("strip -o /usr/local/bin/pipeline"), "{compiled}");
    assert!(compiled.contains("scripts/install-onnxruntime.sh /opt/onnxruntime"), "{compiled}");
    assert!(prebuilt.contains("COPY target/image-context/pipeline /usr/local/bin/pipeline"), "{prebuilt}");
    assert!(prebuilt.contains("COPY target/image-context/onnxruntime/ /opt/onnxruntime/"), "{prebuilt}");
    assert!(
        dockerfile.contains("ARG BINARY_SOURCE=compiled") && dockerfile.contains("FROM ${BINARY_SOURCE} AS binary")
    );
    let image = dockerfile.rsplit("\nFROM ").next().expect("a final stage");
    assert!(image.contains("COPY --from=binary /usr/local/bin/pipeline /usr/local/bin/pipeline"), "{image}");
    assert!(image.contains("COPY --from=binary /opt/onnxruntime/ /opt/onnxruntime/"), "{image}");
    let library = image
        .lines()
        .find_map(|line| line.trim().strip_prefix("ENV ORT_DYLIB_PATH=/opt/onnxruntime/"))
        .expect("ORT_DYLIB_PATH");
    assert_eq!(library, runtime::inference::LIBRARY_FILE, "the library install-onnxruntime.sh installs");
    let ignored = std::fs::read_to_string(root.join(".dockerignore")).expect(".dockerignore");
    assert!(ignored.contains("\ntarget/\n!target/image-context/\n"), "the prebuilt files reach the build context");

    let tag = "registry.example.com/attention-classifier/pipeline:0.1.0";
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    assert!(readme.contains(&format!("docker build -t {tag} .")), "the README builds {tag}");
    for file in ["kubernetes-indexed-job.yaml", "kubernetes-finalize-job.yaml", "airflow_dag.py"] {
        let text = std::fs::read_to_string(root.join("deploy").join(file)).expect("deploy file");
        assert!(text.contains(tag), "{file} names another image");
    }
    let job = std::fs::read_to_string(root.join("deploy").join("kubernetes-indexed-job.yaml")).expect("job");
    assert!(job.contains(r#"command: ["/deploy/run-shard.sh""#), "{job}");
    let dag = std::fs::read_to_string(root.join("deploy").join("airflow_dag.py")).expect("dag");
    assert!(dag.contains(r#"RUN_SHARD = "/deploy/run-shard.sh""#), "the DAG's pods run the Job's script");
}
