# Choose the Python interpreter on purpose (sourced, never executed).
#
# hp_select_python sets HP_PYTHON (absolute path) and HP_PYTHON_VERSION.
#   - $PYTHON when set: it must have the required modules. For Debian's /usr/bin/python3 a
#     missing module names its Debian package; for any other interpreter the missing modules
#     are installed from deps/python-packages.lock (pinned, --require-hashes) when root and
#     hp_prepare_check_only is not 1 (prepare_host.sh --check sets it).
#   - else the first of /usr/bin/python3, python3 that has every required module.

# module -> Debian package that provides it for /usr/bin/python3
declare -gA HP_PY_MODULE_PACKAGE=(
    [setuptools]=python3-setuptools [wheel]=python3-wheel [numpy]=python3-numpy
    [pytest]=python3-pytest [pytest_timeout]=python3-pytest-timeout [xdist]=python3-pytest-xdist
    [venv]=python3-venv
    [jsonschema]=python3-jsonschema
)
HP_PY_REQUIRED_MODULES=(setuptools wheel numpy pytest pytest_timeout xdist venv jsonschema)

# Prints the required modules the interpreter $1 cannot import.
hp_python_missing_modules() {
    "$1" - "${HP_PY_REQUIRED_MODULES[@]}" <<'PY' 2>/dev/null || printf '%s\n' "${HP_PY_REQUIRED_MODULES[@]}"
import importlib.util, sys
for m in sys.argv[1:]:
    if importlib.util.find_spec(m) is None:
        print(m)
PY
}

hp_select_python() {
    local candidate missing
    if [[ -n "${PYTHON:-}" ]]; then
        candidate="$(command -v "$PYTHON" || true)"
        [[ -n "$candidate" ]] || hp_die 5 HP-PREPARE-PYTHON-NOT-FOUND "PYTHON=$PYTHON is not an executable"
        missing="$(hp_python_missing_modules "$candidate" | tr '\n' ' ')"
        missing="${missing% }"
        if [[ -n "$missing" ]]; then
            if [[ "$(readlink -f "$candidate")" == "$(readlink -f /usr/bin/python3)" ]]; then
                local pkgs=() m
                for m in $missing; do pkgs+=("${HP_PY_MODULE_PACKAGE[$m]}"); done
                hp_die 5 HP-PREPARE-PYTHON-MODULES "$candidate lacks modules: $missing" \
                    "apt-get install -y ${pkgs[*]}"
            fi
            local pip=("$candidate" -m pip install --require-hashes --only-binary=:all:
                       -r "$HP_REPO_ROOT/deps/python-packages.lock")
            if [[ "$missing" == *venv* || "${hp_prepare_check_only:-0}" == 1 ]] || ! hp_is_root; then
                hp_die 5 HP-PREPARE-PYTHON-MODULES "$candidate lacks modules: $missing" "${pip[*]}"
            fi
            hp_info "installing locked PyPI tooling into $candidate (missing: $missing)"
            "${pip[@]}" -q || hp_die 5 HP-PREPARE-PYTHON-MODULES "pip install from the lock failed" "${pip[*]}"
        fi
    else
        for c in /usr/bin/python3 "$(command -v python3 || true)"; do
            [[ -x "$c" ]] || continue
            if [[ -z "$(hp_python_missing_modules "$c")" ]]; then candidate="$c"; break; fi
        done
        [[ -n "${candidate:-}" ]] || hp_die 5 HP-PREPARE-PYTHON-MODULES \
            "neither /usr/bin/python3 nor python3 has: ${HP_PY_REQUIRED_MODULES[*]}" \
            "apt-get install -y ${HP_PY_MODULE_PACKAGE[*]}"
    fi
    HP_PYTHON="$candidate"
    HP_PYTHON_VERSION="$("$HP_PYTHON" -c 'import platform; print(platform.python_version())')"
    export HP_PYTHON HP_PYTHON_VERSION
}
