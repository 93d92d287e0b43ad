#!/usr/bin/env bash
# tags: quick docs
# Every relative link in README.md and the Markdown under docs/ and bench/
# resolves:
# - a link [text](path) names a file or folder of the repository (relative
#   to the page that holds it), never one outside it (a lone clone has no
#   ../shared);
# - a link to a heading (page.md#heading, or #heading on the same page)
#   names a heading that page has (GitHub's anchor rule: lower case,
#   punctuation dropped, spaces to dashes);
# - a path in backquotes that starts with docs/ or bench/results/ and ends
#   in a file extension names a file that exists (the pages cite measurement
#   files that way, and moving one must not leave its citations behind).
# The checker first runs on a small tree with one broken link of each kind
# and must report each of them, so this test fails when the checker stops
# seeing broken links. No cluster, no build: well under a second.
. "$(dirname "$0")/lib.sh"

# slug TEXT: the anchor GitHub gives a heading
slug() {
    printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

# anchors FILE: one anchor per heading of FILE (outside ``` blocks)
anchors() {
    local line
    awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
        while IFS= read -r line; do slug "$line"; echo; done
}

# check_tree ROOT: prints one line per broken link under ROOT; returns the count
check_tree() {
    local root=$1 bad=0 page dir link target path anchor real rootreal
    rootreal=$(cd "$root" && pwd -P)
    while IFS= read -r page; do
        dir=$(dirname "$page")
        # [text](target): targets without a scheme, fenced code left out
        while IFS= read -r link; do
            target=${link%% *}
            case $target in http://*|https://*|mailto:*|ftp://*) continue ;; esac
            path=${target%%#*}
            anchor=
            [ "$path" != "$target" ] && anchor=${target#*#}
            if [ -z "$path" ]; then
                real=$page
            else
                real=$dir/$path
                if [ ! -e "$real" ]; then
                    echo "${page#"$root"/}: broken link ($target): no $path"; bad=$((bad + 1)); continue
                fi
                case $(cd "$(dirname "$real")" && pwd -P)/ in
                    "$rootreal"/*) ;;
                    *) echo "${page#"$root"/}: link outside the repository ($target)"; bad=$((bad + 1))
                       continue ;;
                esac
            fi
            if [ -n "$anchor" ] && [ -f "$real" ] && [[ $real == *.md ]] &&
                ! anchors "$real" | grep -qxF -- "$anchor"; then
                echo "${page#"$root"/}: broken link ($target): no heading #$anchor in $real"
                bad=$((bad + 1))
            fi
        done < <(awk '/^```/ { code = !code; next } !code' "$page" |
                 grep -o '\]([^)]*)' | sed -e 's/^](//' -e 's/)$//')
        # `docs/...ext` and `bench/results/...ext` in backquotes: from the root
        while IFS= read -r path; do
            [ -e "$root/$path" ] && continue
            # a file the code writes (bench/results/latest.jsonl) is ignored by git
            git -C "$root" check-ignore -q "$path" 2>/dev/null && continue
            echo "${page#"$root"/}: names \`$path\`, which does not exist"; bad=$((bad + 1))
        done < <(grep -o '`\(docs\|bench/results\)/[A-Za-z0-9_./-]*\.[a-z]\{2,5\}`' "$page" |
                 tr -d '`' | grep -v '[*]' | sort -u)
    done < <(cd "$root" && { ls README.md 2>/dev/null
                             find docs bench -name '*.md' 2>/dev/null; } | sort |
             sed "s|^|$root/|")
    [ "$bad" -gt 255 ] && bad=255
    return "$bad"
}

# the checker sees broken links: one of each kind in a small tree
F=$T/fixture
mkdir -p "$F/docs" "$F/bench/results"
printf '# Top\n\n## Two words\n' >"$F/docs/a.md"
cat >"$F/README.md" <<'EOF'
[good](docs/a.md) [good anchor](docs/a.md#two-words) [web](https://example.org/x)
[missing file](docs/nope.md)
[missing heading](docs/a.md#three-words)
[outside](../outside.md)
`docs/gone-2026-01-01.jsonl`
```
[in a code block](docs/not-checked.md)
```
EOF
touch "$T/outside.md"
out=$(check_tree "$F"); n=$?
echo "$out"
[ "$n" = 4 ] || fail "the checker found $n broken link(s) in the fixture, expected 4"
for want in 'no docs/nope.md' 'no heading #three-words' 'outside the repository' \
            'docs/gone-2026-01-01.jsonl'; do
    grep -qF -- "$want" <<<"$out" || fail "the checker missed: $want"
done
ok "the checker reports a missing file, a missing heading, a link outside, a gone path"

# the repository itself
out=$(check_tree "$ROOT"); n=$?
[ "$n" = 0 ] || { echo "$out"; fail "$n broken link(s) in README.md, docs/ or bench/"; }
pages=$(cd "$ROOT" && { ls README.md; find docs bench -name '*.md'; } | wc -l)
ok "every relative link of $pages page(s) resolves"
pass
