"""The web console in a real headless Chromium (Debian's chromium + chromedriver via Selenium),
against the real broker, with real clients producing and consuming alongside.
A failing test leaves ``screenshot.png`` (and ``page.html``) in its tmp_path."""

from __future__ import annotations

import re
import shutil
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import start_broker

pytestmark = [pytest.mark.integration, pytest.mark.minikafka_only(reason="minikafka's web console")]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("chromium and chromedriver are needed (tests/tools/system-deps.sh installs them)",
                allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SCRIPT_VALUE = "<script>window.__pwned = 1</script><b>bold?</b>"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    handle = start_broker(tmp_path_factory.mktemp("console"), http_port=0, group_min_session_timeout_ms=100)
    match = re.search(r"http on [^:\s]+:(\d+)", handle.read_log())
    assert match, handle.read_log()
    handle.http = f"http://127.0.0.1:{match.group(1)}"
    admin = AdminClient({"bootstrap.servers": handle.bootstrap})
    admin.create_topics([NewTopic("web", num_partitions=2, replication_factor=1)])["web"].result(timeout=10)
    producer = Producer({"bootstrap.servers": handle.bootstrap})
    for i in range(60):
        producer.produce("web", key=f"k{i}".encode(), value=f'{{"n": {i}}}'.encode(), partition=0,
                         headers=[("h", b"v")])
    producer.produce("web", value=SCRIPT_VALUE.encode(), partition=1)
    producer.flush(10)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


@pytest.fixture(autouse=True)
def screenshot_on_failure(request, browser, tmp_path):
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        browser.save_screenshot(str(tmp_path / "screenshot.png"))
        (tmp_path / "page.html").write_text(browser.page_source)


def wait_for(browser, condition, timeout=15):
    return WebDriverWait(browser, timeout, poll_frequency=0.1).until(lambda d: condition(d))


def cells(browser, table_id: str) -> list[list[str]]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"#{table_id} tr")
    return [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rows[1:]]


def consumer_for(broker, group: str | None = None) -> Consumer:
    config = {"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "group.id": group or "console-reader", "session.timeout.ms": 6000}
    return Consumer(config)


def poll_values(consumer, n: int, timeout: float = 20) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.3)
        if msg is not None and msg.error() is None:
            got.append(msg)
    return got


def test_every_page_loads(broker, browser):
    for path, title in [("/", "Overview"), ("/topics", "Topics"), ("/topics/web", "Topic web"),
                        ("/groups", "Consumer groups"), ("/transactions", "Transactions"), ("/producers", "Producers")]:
        browser.get(broker.http + path)
        assert browser.find_element(By.ID, "title").text == title
    browser.get(broker.http + "/")
    wait_for(browser, lambda d: d.find_element(By.ID, "msgs").text == "61")
    assert int(browser.find_element(By.ID, "topics").text) >= 1
    browser.get(broker.http + "/topics")
    assert ["web", "2", "61"] == cells(browser, "topics")[-1][:3]


def test_browse_messages_by_offset_and_timestamp(broker, browser):
    browser.get(broker.http + "/topics/web?partition=0&offset=0&limit=10&format=json")
    rows = cells(browser, "messages")
    assert [r[0] for r in rows] == [str(i) for i in range(10)]
    assert rows[3][2] == "k3" and rows[3][3] == '{\n  "n": 3\n}' and rows[3][4] == "h=v"
    browser.find_element(By.ID, "nextpage").click()
    assert [r[0] for r in cells(browser, "messages")] == [str(i) for i in range(10, 20)]
    browser.find_element(By.ID, "prev").click()
    assert cells(browser, "messages")[0][0] == "0"
    # The newest page by default; hex shows the bytes.
    browser.get(broker.http + "/topics/web?partition=0&limit=5&format=hex")
    rows = cells(browser, "messages")
    assert [r[0] for r in rows] == ["55", "56", "57", "58", "59"]
    assert rows[0][2] == "6b 35 35"  # b"k55"
    # By timestamp: everything in the topic is after 2000-01-01, nothing before a far-future date.
    browser.get(broker.http + "/topics/web?partition=0&timestamp=2000-01-01T00:00:00&limit=3")
    assert [r[0] for r in cells(browser, "messages")] == ["0", "1", "2"]
    browser.get(broker.http + "/topics/web?partition=0&timestamp=4102444800000")
    assert cells(browser, "messages") == []


def test_script_value_is_shown_as_text(broker, browser):
    browser.get(broker.http + "/topics/web?partition=1&offset=0")
    value = browser.find_element(By.CSS_SELECTOR, "#messages pre.value")
    assert value.text == SCRIPT_VALUE
    assert browser.execute_script("return window.__pwned === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, "#messages b")


def test_produce_form_reaches_a_real_consumer(broker, browser):
    browser.get(broker.http + "/topics/web")
    [o for o in browser.find_elements(By.CSS_SELECTOR, "#produce select[name=partition] option") if o.text == "1"][0].click()
    browser.find_element(By.ID, "pkey").send_keys("form-key")
    browser.find_element(By.ID, "pvalue").send_keys("from the form <i>")
    browser.find_element(By.ID, "psend").click()
    notice = wait_for(browser, lambda d: d.find_elements(By.ID, "notice"))[0].text
    match = re.search(r"partition (\d+) at offset (\d+)", notice)
    assert match, notice
    partition, offset = int(match.group(1)), int(match.group(2))
    assert partition == 1
    consumer = consumer_for(broker)
    consumer.assign([TopicPartition("web", partition, offset)])
    try:
        (msg,) = poll_values(consumer, 1)
    finally:
        consumer.close()
    assert (msg.key(), msg.value(), msg.offset()) == (b"form-key", b"from the form <i>", offset)


def test_live_tail_shows_new_records(broker, browser):
    browser.get(broker.http + "/topics/web?partition=0")
    browser.find_element(By.ID, "tailbtn").click()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("web", value=b"<img src=x onerror=alert(1)> tailed", partition=0)
    producer.flush(10)
    row = wait_for(browser, lambda d: [r for r in d.find_elements(By.CSS_SELECTOR, "#tail tr.tailmsg")
                                       if "tailed" in r.text])
    assert row[0].find_elements(By.TAG_NAME, "td")[2].text == "<img src=x onerror=alert(1)> tailed"


def test_reset_group_offsets_and_consumer_resumes_there(broker, browser):
    consumer = consumer_for(broker, "web-group")
    total = sum(consumer.get_watermark_offsets(TopicPartition("web", p), timeout=10)[1] for p in (0, 1))
    consumer.subscribe(["web"])
    got = poll_values(consumer, total)
    assert len(got) == total
    consumer.commit(asynchronous=False)
    consumer.close()  # the group must be empty to reset

    browser.get(broker.http + "/groups")
    browser.find_element(By.LINK_TEXT, "web-group").click()
    assert browser.find_element(By.ID, "state").text == "Empty"
    lag = {(r[0], r[1]): r for r in cells(browser, "lag")}
    assert lag[("web", "0")][4] == "0"
    browser.find_element(By.CSS_SELECTOR, "#reset input[name=topic]").send_keys("web")
    [o for o in browser.find_elements(By.CSS_SELECTOR, "#reset select[name=to] option") if o.text == "offset"][0].click()
    browser.find_element(By.CSS_SELECTOR, "#reset input[name=value]").send_keys("57")
    browser.find_element(By.ID, "resetbtn").click()
    plan = wait_for(browser, lambda d: cells(d, "plan"))
    assert plan[0][:4] == ["web", "0", str(lag[("web", "0")][2]), "57"]
    assert lag[("web", "0")][2] != "57"  # the plan changed nothing yet
    assert {(r[0], r[1]): r for r in cells(browser, "lag")}[("web", "0")][2] == lag[("web", "0")][2]
    browser.find_element(By.ID, "resetbtn").click()  # confirm
    wait_for(browser, lambda d: "offsets reset" in (d.find_elements(By.ID, "notice") or [None])[0].text
             if d.find_elements(By.ID, "notice") else False)
    lag = {(r[0], r[1]): r for r in cells(browser, "lag")}
    assert lag[("web", "0")][2] == "57"

    consumer = consumer_for(broker, "web-group")
    consumer.subscribe(["web"])
    try:
        msgs = [m for m in poll_values(consumer, 3) if m.partition() == 0]
    finally:
        consumer.close()
    assert msgs and msgs[0].offset() == 57


def test_reset_refused_while_group_has_members(broker, browser):
    consumer = consumer_for(broker, "busy-group")
    consumer.subscribe(["web"])
    try:
        assert poll_values(consumer, 1)
        browser.get(broker.http + "/groups/busy-group")
        wait_for(browser, lambda d: d.find_element(By.ID, "state").text == "Stable")
        browser.find_element(By.CSS_SELECTOR, "#reset input[name=topic]").send_keys("web")
        browser.find_element(By.ID, "resetbtn").click()
        wait_for(browser, lambda d: d.find_elements(By.ID, "plan"))
        browser.find_element(By.ID, "resetbtn").click()
        error = wait_for(browser, lambda d: d.find_elements(By.ID, "error"))[0].text
        assert "reset refused" in error
    finally:
        consumer.close()


def test_transactions_and_producers_pages_show_an_open_transaction(broker, browser):
    offsets = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "console-txn<b>",
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(20)
    producer.begin_transaction()
    try:
        producer.produce("web", value=b"in a transaction", partition=1,
                         on_delivery=lambda err, msg: offsets.append(msg.offset()))
        producer.produce("web", value=b"in a transaction too", partition=1)
        producer.flush(10)  # both records are in the log; the transaction stays open
        assert len(offsets) == 1

        browser.get(broker.http + "/")
        browser.find_element(By.LINK_TEXT, "Transactions").click()
        assert browser.find_element(By.ID, "title").text == "Transactions"
        (row,) = [r for r in cells(browser, "transactions") if r[0] == "console-txn<b>"]  # escaped, shown as text
        txn_id, state, pid, epoch, timeout, started, duration, partitions = row
        assert (state, epoch, timeout, partitions) == ("Ongoing", "0", "60000 ms", "web: 1")
        assert int(pid) >= 0 and started and re.fullmatch(r"\d+\.\d{3}s", duration), row
        browser.get(broker.http + "/transactions?state=CompleteCommit")
        assert not [r for r in cells(browser, "transactions") if r[0] == "console-txn<b>"]

        browser.find_element(By.LINK_TEXT, "Producers").click()
        assert browser.find_element(By.ID, "title").text == "Producers"
        (prow,) = [r for r in cells(browser, "producers") if r[2] == pid]
        topic, partition, _, pepoch, last_seq, last_time, coordinator_epoch, txn_start = prow
        # Two records from sequence 0: the last sequence is 1; the open transaction starts at the first.
        assert (topic, partition, pepoch, last_seq, txn_start) == ("web", "1", "0", "1", str(offsets[0])), prow
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", last_time), prow
    finally:
        producer.abort_transaction(10)

    browser.get(broker.http + "/transactions")
    (row,) = [r for r in cells(browser, "transactions") if r[0] == "console-txn<b>"]
    assert (row[1], row[5], row[6]) == ("CompleteAbort", "", "")
    browser.get(broker.http + "/topics/web")
    browser.find_element(By.ID, "producerslink").click()
    (prow,) = [r for r in cells(browser, "producers") if r[2] == pid]
    assert prow[7] == ""  # no open transaction after the abort marker
