//! `baracuda doctor` as a user runs it: on any machine it ends with one
//! line saying `ready` or what is missing, exits 0 exactly when ready, and
//! never panics (no GPU, driver or library is needed for this test).

use std::process::Command;

#[test]
fn doctor_ends_with_ready_or_what_is_missing() {
    let out = Command::new(env!("CARGO_BIN_EXE_baracuda"))
        .arg("doctor")
        .output()
        .expect("run baracuda doctor");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    let code = out.status.code();
    if last == "ready" {
        assert_eq!(code, Some(0), "{stdout}");
    } else {
        assert!(last.starts_with("not ready: missing "), "{stdout}");
        assert_eq!(code, Some(1), "{stdout}");
    }
    for label in ["driver", "NVRTC", "headers", "cuBLASLt", "cuDNN", "cache"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(label)),
            "no {label} line:\n{stdout}"
        );
    }
}

#[test]
fn unknown_commands_print_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_baracuda"))
        .arg("frobnicate")
        .output()
        .expect("run baracuda");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: baracuda doctor"));
}
