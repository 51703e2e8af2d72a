//! Model packages that do not hold together: a graph, manifest or tokenizer that disagree,
//! outputs that are not finite, and libraries found where the user did not put them.

use std::process::Command;

use arrow::array::Array;

use super::*;

#[test]
fn labels_that_do_not_match_the_graph_are_refused_when_the_package_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    // A 3-class graph with two labels (this panicked at `labels[best]`).
    let model = package_with(dir.path(), "fixtures/tiny-avg-3class", |m| m["labels"] = serde_json::json!(["a", "b"]));
    let output = run_with_model(&model, &out, &[]);
    assert_refused(&output, 1, &["outputs 3 class probabilities", "lists 2 labels", "manifest.json"], &out);
    // The same package, inspected, is refused too.
    let inspect = pipeline(&["inspect", &model.to_string_lossy()], &[]);
    assert_refused(&inspect, 1, &["outputs 3 class probabilities"], &out);
    std::fs::remove_dir_all(&model).expect("clean");

    // A 2-class graph with three labels (accepted before, metadata listing 3 labels).
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["labels"] = serde_json::json!(["a", "b", "c"]));
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["outputs 2 class probabilities", "lists 3 labels"], &out);
    std::fs::remove_dir_all(&model).expect("clean");

    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["labels"] = serde_json::json!(["x", "x"]));
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["label `x` twice"], &out);
}

#[test]
fn attention_heads_that_do_not_match_the_graph_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["attention_heads"] = 8.into());
    let output = run_with_model(&model, &out, &[]);
    assert_refused(&output, 1, &["outputs 3 attention rows", "attention_heads = 8"], &out);

    // Without an `attention` output at all, the message reads as English.
    std::fs::remove_dir_all(&model).expect("clean");
    let model = package_with(dir.path(), "fixtures/tiny-avg", |m| m["attention_heads"] = 2.into());
    let output = run_with_model(&model, &out, &[]);
    assert_refused(&output, 1, &["the graph has no `attention` output"], &out);

    // A hierarchical model has one attention row.
    std::fs::remove_dir_all(&model).expect("clean");
    let model = package_with(dir.path(), "fixtures/tiny-han", |m| m["attention_heads"] = 3.into());
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["attention_heads = Some(3)", "one attention row"], &out);
}

#[test]
fn a_tokenizer_from_another_package_is_refused_naming_both_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    let model = package_with(dir.path(), "fixtures/tiny-san", |_| {});
    std::fs::copy(repo_root().join("fixtures/default-model/tokenizer.json"), model.join("tokenizer.json"))
        .expect("copy");
    let output = run_with_model(&model, &out, &[]);
    assert_refused(&output, 1, &["tokenizer.json produces token ids up to", "model.onnx has", "rows"], &out);
}

#[test]
fn inspect_refuses_a_graph_that_is_not_a_package_graph() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A real ONNX graph, but another model's: the AVG baseline's, with no attention output.
    let model = package_with(dir.path(), "fixtures/tiny-san", |_| {});
    std::fs::copy(repo_root().join("fixtures/tiny-avg/model.onnx"), model.join("model.onnx")).expect("copy");
    let output = pipeline(&["inspect", &model.to_string_lossy()], &[]);
    assert_eq!(exit_code(&output), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("model.onnx"), "{}", stderr(&output));
}

/// A copy of the fixture package `source` whose graph `edit` changes.
fn package_with_graph(dir: &Path, source: &str, edit: impl FnOnce(&mut tract_onnx::pb::ModelProto)) -> PathBuf {
    use prost::Message;
    let model = package_with(dir, source, |_| {});
    let bytes = std::fs::read(model.join("model.onnx")).expect("graph");
    let mut graph = tract_onnx::pb::ModelProto::decode(bytes.as_slice()).expect("protobuf");
    edit(&mut graph);
    std::fs::write(model.join("model.onnx"), graph.encode_to_vec()).expect("write graph");
    model
}

/// A copy of `fixtures/tiny-san` whose graph output `name` becomes `name + (sqrt(100 - tokens) -
/// sqrt(100 - tokens))`: NaN for a document of more than 100 tokens, unchanged otherwise, so
/// the one-token probe when the package opens passes. (NaN put into the embedding never
/// arrives: tract's activations clamp it away.)
fn package_with_nan_past_100_tokens(dir: &Path, name: &str) -> PathBuf {
    use tract_onnx::pb::{NodeProto, TensorProto};
    package_with_graph(dir, "fixtures/tiny-san", |graph| {
        let body = graph.graph.as_mut().expect("graph");
        let node = |op: &str, inputs: &[&str], output: &str| NodeProto {
            op_type: op.to_owned(),
            input: inputs.iter().map(|i| (*i).to_owned()).collect(),
            output: vec![output.to_owned()],
            name: output.to_owned(),
            ..Default::default()
        };
        let raw = format!("{name}_raw");
        let producer = body.node.iter_mut().find(|n| n.output.iter().any(|o| o == name)).expect("output node");
        for output in &mut producer.output {
            if output == name {
                output.clone_from(&raw);
            }
        }
        for (initializer, values) in [("hundred", None), ("axis_one", Some(vec![1])), ("axis_two", Some(vec![2]))] {
            body.initializer.push(TensorProto {
                name: initializer.to_owned(),
                data_type: if values.is_some() { 7 } else { 1 },
                dims: vec![1],
                float_data: if values.is_some() { vec![] } else { vec![100.0] },
                int64_data: values.unwrap_or_default(),
                ..Default::default()
            });
        }
        let mut mask = node("Cast", &["attention_mask"], "mask_float");
        mask.attribute.push(tract_onnx::pb::AttributeProto {
            name: "to".to_owned(),
            r#type: 2,
            i: 1,
            ..Default::default()
        });
        // [batch, 1] for probs; [batch, 1, 1] for outputs of rank 3.
        let rank_three = name != "probs";
        body.node.extend([
            mask,
            node("ReduceSum", &["mask_float", "axis_one"], "tokens"),
            node("Sub", &["hundred", "tokens"], "room"),
            node("Sqrt", &["room"], "root"),
            node("Sub", &["root", "root"], "nan_past_100"),
        ]);
        if rank_three {
            body.node.push(node("Unsqueeze", &["nan_past_100", "axis_two"], "nan_past_100_3d"));
        }
        let nan = if rank_three { "nan_past_100_3d" } else { "nan_past_100" };
        body.node.push(node("Add", &[&raw, nan], name));
    })
}

/// The first fixture review of more than 100 tokens, as the tiny SAN's tokenizer counts them.
fn first_review_past_100_tokens(dir: &Path) -> usize {
    let finite = dir.join("finite.parquet");
    assert!(run_with_model(&repo_root().join("fixtures/tiny-san"), &finite, &[]).status.success());
    read(&finite)
        .column_by_name("token_spans")
        .map(|tokens| {
            let tokens = tokens.as_any().downcast_ref::<arrow::array::ListArray>().expect("list");
            (0..tokens.len()).find(|&row| tokens.value_length(row) > 100).expect("a long review")
        })
        .expect("tokens")
}

#[test]
fn probabilities_that_are_not_finite_stop_the_run_naming_the_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = package_with_nan_past_100_tokens(dir.path(), "probs");
    let out = dir.path().join("out.parquet");
    let output = run_with_model(&model, &out, &["--backend", "tract", "--chunk-rows", "1000"]);
    let long = first_review_past_100_tokens(dir.path());
    assert_refused(&output, 1, &["not finite", "reviews.parquet", &format!("row(s) {long},")], &out);
}

#[test]
fn attention_or_contributions_that_are_not_finite_stop_the_run_naming_the_rows() {
    // These were written as NaN floats, or as bytes of 0 in compact output: "no push".
    let dir = tempfile::tempdir().expect("tempdir");
    let long = first_review_past_100_tokens(dir.path());
    for (name, what) in [("attention", "attention weights"), ("contribution", "contributions")] {
        let model = package_with_nan_past_100_tokens(dir.path(), name);
        for attention in ["compact", "full"] {
            let out = dir.path().join("out.parquet");
            let output =
                run_with_model(&model, &out, &["--backend", "tract", "--chunk-rows", "1000", "--attention", attention]);
            let needles = [what, "not finite", "reviews.parquet", &format!("row(s) {long},")];
            assert_refused(&output, 1, &needles, &out);
        }
        std::fs::remove_dir_all(&model).expect("clean");
    }
}

#[test]
fn manifest_labels_that_contradict_the_graph_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.parquet");
    // The same two labels swapped: every prediction would be inverted.
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["labels"] = serde_json::json!(["pos", "neg"]));
    assert_refused(
        &run_with_model(&model, &out, &[]),
        1,
        &["exported with the labels [neg, pos]", "another order", "manifest.json"],
        &out,
    );
    std::fs::remove_dir_all(&model).expect("clean");
    let model = package_with(dir.path(), "fixtures/tiny-san", |m| m["labels"] = serde_json::json!(["bad", "good"]));
    assert_refused(&run_with_model(&model, &out, &[]), 1, &["exported with the labels [neg, pos]"], &out);
}

#[test]
fn an_input_declared_with_two_to_the_forty_elements_is_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = package_with_graph(dir.path(), "fixtures/tiny-san", |graph| {
        use tract_onnx::pb::tensor_shape_proto::dimension::Value;
        let body = graph.graph.as_mut().expect("graph");
        for input in &mut body.input {
            let Some(tract_onnx::pb::type_proto::Value::TensorType(tensor)) =
                input.r#type.as_mut().and_then(|t| t.value.as_mut())
            else {
                panic!("a tensor input")
            };
            for dim in &mut tensor.shape.as_mut().expect("shape").dim {
                dim.value = Some(Value::DimValue(1 << 40));
            }
        }
    });
    let out = dir.path().join("out.parquet");
    let output = run_with_model(&model, &out, &["--backend", "tract"]);
    assert_refused(&output, 1, &["model.onnx", "`input_ids` with a fixed dimension of 1099511627776"], &out);
}

#[test]
fn onnx_runtime_is_never_loaded_from_the_working_directory() {
    let planted = tempfile::tempdir().expect("tempdir");
    let library = planted.path().join("target/onnxruntime/libonnxruntime.so.1.32.0");
    std::fs::create_dir_all(library.parent().expect("parent")).expect("mkdir");
    std::fs::write(&library, b"not a library: loading this would run an attacker's code").expect("plant");
    let outputs = tempfile::tempdir().expect("tempdir");
    let out = outputs.path().join("out.parquet");
    // `ort` names the library it tries (before: the planted one, "could not load"); `auto`
    // runs on tract, or on a library beside the binary, never on the planted one.
    for backend in ["ort", "auto"] {
        let output = Command::new(env!("CARGO_BIN_EXE_pipeline"))
            .current_dir(planted.path())
            .env_remove("ORT_DYLIB_PATH")
            .args(["run", "--backend", backend, "--input"])
            .arg(reviews())
            .arg("--model")
            .arg(tiny_model())
            .arg("--output")
            .arg(&out)
            .output()
            .expect("run pipeline");
        let err = stderr(&output);
        assert!(
            !err.contains(&*planted.path().to_string_lossy()),
            "{backend}: the planted library was looked at: {err}"
        );
        if backend == "auto" {
            assert!(output.status.success(), "{err}");
            assert_eq!(read(&out).num_rows(), 300);
        }
    }
}

#[test]
fn a_tokenizer_of_another_package_with_the_same_size_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = package_with(dir.path(), "fixtures/tiny-san", |_| {});
    // Another package's vocabulary of the same size: the same words under other ids (a
    // seed changes most of them; here two are swapped), so the embedding-table check passes.
    let path = model.join("tokenizer.json");
    let mut tokenizer: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    let vocab = tokenizer["model"]["vocab"].as_object_mut().expect("vocab");
    let (good, bad) = (vocab["good"].clone(), vocab["bad"].clone());
    vocab.insert("good".to_owned(), bad);
    vocab.insert("bad".to_owned(), good);
    std::fs::write(&path, tokenizer.to_string()).expect("write");
    let out = dir.path().join("out.parquet");
    let needles = ["tokenizer.json is not the tokenizer", "model.onnx was exported with", "vocabulary"];
    assert_refused(&run_with_model(&model, &out, &[]), 1, &needles, &out);
    assert_refused(&pipeline(&["inspect", &model.to_string_lossy()], &[]), 1, &needles, &out);
}
